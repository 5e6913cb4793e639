// Run folders: what a run folder or checkpoint argument resolves to, which checkpoint --resume
// continues from (and when it must refuse), the refusals of prepare_run_dir and --overwrite's
// tree removal (symlinks not followed), and replacing a folder as a whole.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>

#include "tiny_run.h"
#include "train/checkpoint.h"
#include "train/run_dir.h"
#include "util/errors.h"
#include "util/file_tree.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

// The message of the UserError that `f` throws ("" when it throws none).
template <class F> std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

void save_steps(const fs::path& run, std::initializer_list<int64_t> steps) {
  torch::nn::Linear net(3, 2);
  TrainState s;
  for (int64_t step : steps) {
    s.step = step;
    save_checkpoint(run, *net, nullptr, s, "cfg", /*keep_last=*/10);
  }
}

void corrupt(const fs::path& f) { fs::resize_file(f, fs::file_size(f) - 7); }

void write_metrics(const fs::path& run, std::initializer_list<int64_t> steps) {
  std::ofstream out(run / "metrics.jsonl");
  for (int64_t s : steps) out << "{\"step\":" << s << ",\"loss\":1.5}\n";
  out << "{\"step\":";  // a line torn by the crash
}

TEST(RunDir, ResolvesRunFoldersAndCheckpointFiles) {
  const fs::path run = test::fresh_dir("resolve_run");
  EXPECT_EQ(error_of([&] { resolve_checkpoint((run / "nothing").string(), "--init"); }),
            "--init " + (run / "nothing").string() + ": checkpoint not found (no such file or run folder)");
  EXPECT_NE(error_of([&] { resolve_checkpoint(run.string()); }).find("no checkpoint in this run folder"),
            std::string::npos);

  save_steps(run, {2, 4});
  auto r = resolve_checkpoint(run.string());
  EXPECT_EQ(r.checkpoint, run / "checkpoints/step_00000004.pt");
  EXPECT_EQ(r.run_dir, run);
  r = resolve_checkpoint((run / "checkpoints").string());  // the checkpoints/ folder stands for its run
  EXPECT_EQ(r.checkpoint, run / "checkpoints/step_00000004.pt");
  EXPECT_EQ(r.run_dir, run);
  r = resolve_checkpoint((run / "checkpoints/step_00000002.pt").string());
  EXPECT_EQ(r.checkpoint, run / "checkpoints/step_00000002.pt");
  EXPECT_EQ(r.run_dir, run);

  corrupt(run / "checkpoints/step_00000004.pt");  // the newest is skipped
  EXPECT_EQ(resolve_checkpoint(run.string()).checkpoint, run / "checkpoints/step_00000002.pt");
  corrupt(run / "checkpoints/step_00000002.pt");  // none left: refused, each one's reason given
  const std::string e = error_of([&] { resolve_checkpoint(run.string()); });
  EXPECT_NE(e.find("no usable checkpoint in this run folder: step_00000004.pt: no checksum"), std::string::npos) << e;
  EXPECT_NE(e.find("; step_00000002.pt: no checksum"), std::string::npos) << e;

  const fs::path loose = test::fresh_dir("resolve_loose") / "model.pt";
  torch::nn::Linear net(3, 2);
  write_checkpoint(loose, *net, nullptr, nullptr, "cfg");
  r = resolve_checkpoint(loose.string());
  EXPECT_EQ(r.checkpoint, loose);
  EXPECT_EQ(r.run_dir, loose.parent_path());
}

TEST(RunDir, ResumeUsesTheNewestGoodCheckpointAndRefusesWhenAllAreBad) {
  const fs::path run = test::fresh_dir("resume_pick");
  save_steps(run, {5, 10});
  EXPECT_EQ(*checkpoint_to_resume(run, 5), run / "checkpoints/step_00000010.pt");
  corrupt(run / "checkpoints/step_00000010.pt");
  EXPECT_EQ(*checkpoint_to_resume(run, 5), run / "checkpoints/step_00000005.pt");
  corrupt(run / "checkpoints/step_00000005.pt");
  const std::string e = error_of([&] { checkpoint_to_resume(run, 5); });
  EXPECT_EQ(e.rfind("--resume: no usable checkpoint in " + (run / "checkpoints").string(), 0), 0u) << e;
  EXPECT_NE(e.find("step_00000010.pt: no checksum"), std::string::npos) << e;
  EXPECT_NE(e.find("--overwrite"), std::string::npos) << e;
}

TEST(RunDir, ResumeWithoutCheckpointStartsOverOnlyBeforeTheFirstSave) {
  const fs::path run = test::fresh_dir("resume_none");
  EXPECT_FALSE(checkpoint_to_resume(run, 5).has_value());  // killed before anything was logged
  write_metrics(run, {5});  // killed between the step-5 metrics row and the step-5 checkpoint
  EXPECT_FALSE(checkpoint_to_resume(run, 5).has_value());
  EXPECT_FALSE(checkpoint_to_resume(run, 0).has_value());  // save_every 0: the only save is the last
  write_metrics(run, {5, 10});  // a checkpoint was written at step 5 and is gone
  const std::string e = error_of([&] { checkpoint_to_resume(run, 5); });
  EXPECT_NE(e.find("metrics.jsonl reaches step 10, past the first checkpoint at step 5"), std::string::npos) << e;

  const fs::path gone = test::fresh_dir("resume_gone");
  save_steps(gone, {3});
  fs::remove(gone / "checkpoints/step_00000003.pt");  // `latest` is left
  EXPECT_NE(error_of([&] { checkpoint_to_resume(gone, 3); }).find("holds no step_<N>.pt file"), std::string::npos);
}

TEST(RunDir, PrepareRefusesWhatWouldLoseWorkOrCannotWork) {
  const fs::path base = test::fresh_dir("prepare");
  const fs::path dir = base / "run";
  EXPECT_FALSE(prepare_run_dir(dir, {}));  // created
  EXPECT_TRUE(fs::is_directory(dir));
  std::ofstream(dir / "train.log") << "x\n";
  EXPECT_EQ(error_of([&] { prepare_run_dir(dir, {}); }),
            "run folder " + dir.string() + " already exists: pass --resume to continue it, --overwrite to replace it, or --run-dir DIR for a new run beside it");
  EXPECT_EQ(error_of([&] { prepare_run_dir(dir, {false, false, /*can_resume=*/false}); }),
            "run folder " + dir.string() + " already exists: pass --overwrite to replace it, or --run-dir DIR for a new run beside it");
  EXPECT_NE(error_of([&] { prepare_run_dir(dir, {true, true}); }).find("--resume and --overwrite exclude each other"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "train.log"));  // nothing deleted by the refused pair
  EXPECT_TRUE(prepare_run_dir(dir, {/*resume=*/true}));
  EXPECT_FALSE(prepare_run_dir(base / "fresh", {/*resume=*/true}));  // --resume on nothing: a new run

  std::ofstream(base / "file") << "x\n";
  EXPECT_EQ(error_of([&] { prepare_run_dir(base / "file", {}); }),
            "run folder " + (base / "file").string() + " exists and is not a folder");
  EXPECT_EQ(error_of([&] { prepare_run_dir(base / "file" / "sub", {}); })
                .rfind("cannot create run folder " + (base / "file" / "sub").string() + ": ", 0),
            0u);
  EXPECT_NO_THROW(check_run_dir(base / "other", {}));
  EXPECT_FALSE(fs::exists(base / "other"));  // check_run_dir creates nothing
}

TEST(RunDir, OverwriteRemovesTheTreeButNotWhatSymlinksPointTo) {
  const fs::path base = test::fresh_dir("overwrite");
  const fs::path dir = base / "run", outside = base / "outside";
  fs::create_directories(dir / "checkpoints" / "deep");
  fs::create_directories(outside);
  std::ofstream(outside / "keep.txt") << "keep\n";
  std::ofstream(dir / "checkpoints" / "deep" / "x") << "x\n";
  fs::create_directory_symlink(outside, dir / "link");
  std::ofstream(dir / "config.yaml") << "run: {}\n";  // a run folder (config.yaml and checkpoints/)
  EXPECT_FALSE(prepare_run_dir(dir, {false, /*overwrite=*/true}));
  EXPECT_TRUE(fs::is_directory(dir));
  EXPECT_TRUE(fs::is_empty(dir));
  EXPECT_TRUE(fs::exists(outside / "keep.txt"));
  EXPECT_NO_THROW(remove_tree(base / "missing"));
  remove_tree(dir);
  EXPECT_FALSE(fs::exists(dir));
}

// A run folder that is itself a symlink (runs/x -> a scratch disk) is overwritten where it
// points: the link stays, the old run there is replaced (not left beside a new one written here).
TEST(RunDir, OverwriteThroughASymlinkedRunFolderReplacesItsTarget) {
  const fs::path base = test::fresh_dir("overwrite_link");
  const fs::path scratch = base / "scratch" / "run", link = base / "run";
  fs::create_directories(scratch / "checkpoints");
  std::ofstream(scratch / "config.yaml") << "run: {}\n";
  std::ofstream(scratch / "train.log") << "x\n";
  fs::create_directory_symlink(scratch, link);
  EXPECT_FALSE(prepare_run_dir(link, {false, /*overwrite=*/true}));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_directory(scratch));
  EXPECT_TRUE(fs::is_empty(scratch)) << "the old run where the link points is replaced";
  std::ofstream(link / "train.log") << "new\n";  // the new run writes through the link
  EXPECT_TRUE(fs::exists(scratch / "train.log"));
  EXPECT_TRUE(prepare_run_dir(link, {/*resume=*/true}));
  EXPECT_TRUE(fs::is_symlink(link));
  // The same named with a trailing slash (a shell's completion), which would follow the link.
  EXPECT_FALSE(prepare_run_dir(link.string() + "/", {false, /*overwrite=*/true}));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_empty(scratch));
  // The folder there is emptied, not made anew: its permissions stay.
  std::ofstream(link / "train.log") << "x\n";
  fs::permissions(scratch, fs::perms::group_write, fs::perm_options::add);
  const auto perms = fs::status(scratch).permissions();
  EXPECT_FALSE(prepare_run_dir(link, {false, /*overwrite=*/true}));
  EXPECT_EQ(fs::status(scratch).permissions(), perms);
}

// A failed new run removes only a folder it made: an empty one given to it (a job script's
// mkdir) and a symlink to one (runs/x -> a scratch disk) are left as they were, empty.
TEST(RunDir, DiscardingANewRunRemovesOnlyAFolderItCreated) {
  const fs::path base = test::fresh_dir("discard");
  const fs::path made = base / "made", given = base / "given", scratch = base / "scratch", link = base / "link";
  fs::create_directories(given);
  fs::create_directories(scratch);
  fs::create_directory_symlink(scratch, link);
  for (const fs::path& dir : {made, given, link}) {
    prepare_run_dir(dir, {});
    std::ofstream(dir / "config.yaml") << "run: {}\n";
    fs::create_directories(dir / "seed1");
    discard_new_run_folder(dir.string() + "/");  // named as a shell completes it: the same folder
  }
  EXPECT_FALSE(fs::exists(made));
  EXPECT_TRUE(fs::is_directory(given));
  EXPECT_TRUE(fs::is_empty(given));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_empty(scratch));
}

// --overwrite deletes only an rpe-train run folder, never one that holds the working directory
// or something the new run reads; nothing is deleted by a refusal.
TEST(RunDir, OverwriteDeletesOnlyARunFolderThatHoldsNoInput) {
  const fs::path base = fs::absolute(test::fresh_dir("overwrite_safety"));
  const fs::path notes = base / "notes";
  fs::create_directories(notes);
  std::ofstream(notes / "thesis.tex") << "years of work\n";
  EXPECT_NE(error_of([&] { prepare_run_dir(notes, {false, true}); }).find("is not an rpe-train run folder"),
            std::string::npos);
  EXPECT_TRUE(fs::exists(notes / "thesis.tex"));

  const fs::path run = base / "run";
  fs::create_directories(run / "checkpoints");
  std::ofstream(run / "config.yaml") << "run: {}\n";
  std::ofstream(run / "train.log") << "x\n";
  std::ofstream(run / "checkpoints" / "step_00000001.pt") << "x";
  RunDirRequest reads_from_it{false, true};
  reads_from_it.inputs = {base / "corpus.txt", run / "checkpoints" / "step_00000001.pt"};
  EXPECT_EQ(error_of([&] { prepare_run_dir(run, reads_from_it); }),
            "--overwrite: " + run.string() + " holds " + (run / "checkpoints" / "step_00000001.pt").string() +
                ", which this run reads; write the run elsewhere");
  const fs::path cwd = fs::current_path();
  fs::current_path(run / "checkpoints");
  const std::string held = error_of([&] { prepare_run_dir(run, {false, true}); });
  fs::current_path(cwd);
  EXPECT_NE(held.find("holds the working directory"), std::string::npos) << held;
  EXPECT_TRUE(fs::exists(run / "checkpoints" / "step_00000001.pt"));
  reads_from_it.inputs = {base / "corpus.txt", base / "runs2" / "run"};  // a prefix of the name is not inside
  EXPECT_FALSE(prepare_run_dir(run, reads_from_it));
  EXPECT_TRUE(fs::is_empty(run));
  // A run stopped before it wrote config.yaml (while training its tokenizer) has its log.
  const fs::path stopped = base / "stopped";
  fs::create_directories(stopped);
  std::ofstream(stopped / "train.log") << "x\n";
  std::ofstream(stopped / "tokenizer.model") << "x";
  EXPECT_FALSE(prepare_run_dir(stopped, {false, true}));
  EXPECT_TRUE(fs::is_empty(stopped));
}

// A run folder in use by another process (its lock held through another open file) is refused
// at once, for --resume and --overwrite alike; the same process may ready it again.
TEST(RunDir, ARunInUseIsRefused) {
  const fs::path dir = test::fresh_dir("in_use") / "run";
  EXPECT_FALSE(prepare_run_dir(dir, {}));
  std::ofstream(dir / "config.yaml") << "run: {}\n";
  std::ofstream(dir / "train.log") << "x\n";
  EXPECT_TRUE(prepare_run_dir(dir, {/*resume=*/true}));  // this process holds it already
  const fs::path other = test::fresh_dir("in_use_other") / "run";
  fs::create_directories(other);
  std::ofstream(other / "train.log") << "x\n";
  const int fd = ::open(other.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // "another process"
  const std::string want = "run folder " + other.string() + " is in use by another rpe-train process; wait for it to end";
  EXPECT_EQ(error_of([&] { prepare_run_dir(other, {/*resume=*/true}); }), want);
  EXPECT_EQ(error_of([&] { check_run_dir(other, {/*resume=*/true}); }), want);
  ::close(fd);
  EXPECT_TRUE(prepare_run_dir(other, {/*resume=*/true}));
}

TEST(RunDir, ReplaceFolderSwapsInTheStagedFolderAndRemovesTheOld) {
  const fs::path base = test::fresh_dir("replace_folder");
  auto stage = [&](const std::string& content) {
    const fs::path staged = base / ("model.tmp-" + content);
    fs::create_directories(staged);
    std::ofstream(staged / "task.json") << content;
    return staged;
  };
  auto read = [](const fs::path& f) {
    std::ifstream in(f);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  replace_folder(stage("first"), base / "model");  // nothing to replace yet
  EXPECT_EQ(read(base / "model" / "task.json"), "first");
  std::ofstream(base / "model" / "stale.pt") << "only in the old folder";
  replace_folder(stage("second"), base / "model");
  EXPECT_EQ(read(base / "model" / "task.json"), "second");
  EXPECT_FALSE(fs::exists(base / "model" / "stale.pt"));  // the folder is replaced, not merged
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(base)) entries += e.path().filename() == "model" ? 1 : 100;
  EXPECT_EQ(entries, 1u);  // neither the staged nor the replaced folder is left behind
  const std::string e = error_of([&] { replace_folder(base / "missing", base / "model"); });
  EXPECT_NE(e.find("cannot replace " + (base / "model").string() + " with " + (base / "missing").string()),
            std::string::npos)
      << e;
  EXPECT_EQ(read(base / "model" / "task.json"), "second");
  remove_tree(base);
}

}  // namespace
}  // namespace rpe
