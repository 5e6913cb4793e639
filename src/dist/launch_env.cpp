// The launcher's environment (torchrun, Slurm, Open MPI) -> LaunchEnv (see data_parallel.h).
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "dist/data_parallel.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe::dist {

namespace {

std::optional<int64_t> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (*end != '\0' || x < 0 || errno == ERANGE)
    throw UserError(std::string("environment variable ") + name + "='" + v + "' is not a non-negative integer" +
                    (errno == ERANGE ? " of 64 bits" : ""));
  return x;
}

std::string env_text(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Whether the launcher placed ranks on more than one node (torchrun sets MASTER_ADDR itself).
bool spans_several_nodes(const LaunchEnv& e) {
  if (e.launcher == "slurm") return env_int("SLURM_NNODES").value_or(1) > 1;
  if (e.launcher == "mpirun") {
    const auto local = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    return local && *local < e.world;
  }
  return false;
}

// The default port of a job that names none (MASTER_PORT unset, Slurm or Open MPI): one of
// [15000, 32000), below the kernel's ephemeral range, from the launcher's job id (FNV-1a), so
// that two jobs sharing a node do not both take 29500 (the second failed to bind, or its ranks
// joined the first's store and waited there).
int64_t port_of_job(const std::string& job) {
  uint64_t h = 1469598103934665603ULL;
  for (const unsigned char c : job) h = (h ^ c) * 1099511628211ULL;
  return 15000 + static_cast<int64_t>(h % 17000);
}

}  // namespace

LaunchEnv detect_launch_env() {
  LaunchEnv e;
  struct Names {
    const char *rank, *world, *local, *launcher;
  };
  // Most specific first: torchrun and mpirun set their variables per process, while an sbatch
  // script's own SLURM_PROCID=0 / SLURM_NTASKS reach every process that mpirun (or torchrun)
  // starts inside the allocation; srun sets them per task.
  const Names sources[] = {{"RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"},
                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun"},
                           {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"}};
  bool found = false;
  for (const auto& s : sources) {
    const auto rank = env_int(s.rank), world = env_int(s.world);
    if (!rank || !world) continue;
    // srun sets SLURM_STEP_ID (and the older SLURM_STEPID) in each task it starts; the batch
    // script and an salloc shell (the allocation's SLURM_PROCID=0 of SLURM_NTASKS) have neither.
    // Taken for rank 0 of N there, the one process would wait at the rendezvous for N - 1 ranks
    // nobody started.
    if (std::string(s.launcher) == "slurm" && env_text("SLURM_STEP_ID").empty() && env_text("SLURM_STEPID").empty()) {
      if (*world > 1)
        log::warn("dist", "SLURM_NTASKS={} but this process was not started by srun (no SLURM_STEP_ID): it runs "
                  "alone; for {} ranks launch it with srun (docs/training.md)", *world, *world);
      continue;
    }
    found = true;
    e.rank = *rank;
    e.world = *world;
    e.local_rank = env_int(s.local).value_or(0);
    e.launcher = s.launcher;
    break;
  }
  // torchrun sets RANK and WORLD_SIZE for every process: one without the other and no other
  // launcher's pair is a launch gone wrong (or a stray export), and taking it for one process
  // would train alone what was meant for many. (SLURM_NTASKS alone is an allocation's shell
  // outside srun: one process, rightly.)
  if (!found && (env_int("RANK").has_value() != env_int("WORLD_SIZE").has_value()))
    throw UserError(std::string("environment variable ") + (env_int("RANK") ? "RANK" : "WORLD_SIZE") +
                    " is set but " + (env_int("RANK") ? "WORLD_SIZE" : "RANK") +
                    " is not: a launcher (torchrun) sets both; unset it to run one process");
  if (e.world < 1 || e.rank >= e.world)
    throw UserError("launcher environment (" + e.launcher + "): rank " + std::to_string(e.rank) +
                    " is not below world size " + std::to_string(e.world));
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) {
    e.master_addr = a;
  } else if (spans_several_nodes(e)) {  // 127.0.0.1 is another machine on every other node
    throw UserError("MASTER_ADDR is not set and this " + e.launcher + " job spans several nodes: export "
                    "MASTER_ADDR=<the first node's address> (and MASTER_PORT) before launching (docs/training.md)");
  }
  if (e.launcher == "torchrun") {
    e.job = env_text("TORCHELASTIC_RUN_ID");
  } else if (e.launcher == "mpirun") {
    for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"})
      if (e.job.empty()) e.job = env_text(name);
  } else if (e.launcher == "slurm" && !env_text("SLURM_JOB_ID").empty()) {
    e.job = env_text("SLURM_JOB_ID") + "." + env_text("SLURM_STEP_ID");
  }
  if (auto p = env_int("MASTER_PORT")) e.master_port = *p;
  else if (e.launcher != "torchrun" && !e.job.empty()) e.master_port = port_of_job(e.job);
  if (e.master_port <= 0 || e.master_port > 65535)
    throw UserError("environment variable MASTER_PORT=" + std::to_string(e.master_port) + " is not a TCP port");
  if (const std::string one = env_text("RPE_TRAIN_GROUP_OF_ONE"); !one.empty()) {
    if (one != "0" && one != "1")
      throw UserError("environment variable RPE_TRAIN_GROUP_OF_ONE='" + one + "' is not 0 or 1");
    e.group_of_one = one == "1";
  }
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  e.agent_store = agent && std::string(agent) == "True";
  e.restart_count = env_int("TORCHELASTIC_RESTART_COUNT").value_or(0);
  return e;
}

}  // namespace rpe::dist
