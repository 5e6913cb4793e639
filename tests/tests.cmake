# The GoogleTest suite: one executable, sources mirroring src/. Tests that need
# ../shared/data or a GPU skip cleanly when those are absent.
set(RPE_TEST_SOURCES
  tests/test_main.cpp
  tests/test_paths.cpp
  tests/test_models.cpp
  tests/config/test_config.cpp
  tests/config/test_config_limits.cpp
  tests/config/test_config_input.cpp
  tests/data/test_masking.cpp
  tests/data/test_wordpiece.cpp
  tests/data/test_sp_training.cpp
  tests/data/test_shards.cpp
  tests/data/test_loader.cpp
  tests/data/test_prepare_stream.cpp
  tests/data/test_chunk_pipeline.cpp
  tests/model/test_add_norm.cpp
  tests/model/test_recompute.cpp
  tests/model/test_saved_mask.cpp
  tests/model/test_model.cpp
  tests/config/test_presets.cpp
  tests/train/test_training.cpp
  tests/train/test_pretrain_smoke.cpp
  tests/interop/test_safetensors.cpp
  tests/interop/test_hf_bert.cpp
  tests/interop/test_method_swap.cpp
  tests/eval/test_squad_metrics.cpp
  tests/eval/test_glue_metrics.cpp
  tests/eval/test_tables.cpp
  tests/eval/test_extra_tables.cpp
  tests/eval/test_table_comparability.cpp
  tests/finetune/test_squad_data.cpp
  tests/finetune/test_cuda_end_to_end.cpp
  tests/finetune/test_finetune_outputs.cpp
  tests/finetune/test_finetune_resume.cpp
  tests/finetune/test_glue_data.cpp
  tests/finetune/test_heads.cpp
  tests/cli/test_inspect_weights.cpp
  tests/util/test_atomic_file.cpp
  tests/util/test_errors.cpp
  tests/util/test_kernel_check.cpp
  tests/util/test_log.cpp
)
# Every test of src/model/attention/ (one per method, the shared fp64 reference, properties,
# dispatch, bf16, registry), globbed like the sources.
file(GLOB RPE_ATTENTION_TESTS CONFIGURE_DEPENDS RELATIVE ${CMAKE_SOURCE_DIR}
     ${CMAKE_SOURCE_DIR}/tests/model/attention/*.cpp)
list(SORT RPE_ATTENTION_TESTS)
list(APPEND RPE_TEST_SOURCES ${RPE_ATTENTION_TESTS})
add_executable(rpe_tests ${RPE_TEST_SOURCES})
target_link_libraries(rpe_tests PRIVATE rpe_core GTest::gtest)
# The absolute paths go into one object only (test_paths.cpp), so ccache shares the rest across checkouts.
target_include_directories(rpe_tests PRIVATE tests)
set_source_files_properties(tests/test_paths.cpp PROPERTIES COMPILE_DEFINITIONS
  "RPE_SOURCE_DIR=\"${CMAKE_SOURCE_DIR}\";RPE_TRAIN_BINARY=\"$<TARGET_FILE:rpe-train>\"")
if(RPE_USE_PCH)
  target_precompile_headers(rpe_tests REUSE_FROM rpe_core)
endif()
set_target_properties(rpe_tests PROPERTIES UNITY_BUILD ${RPE_UNITY_BUILD} UNITY_BUILD_BATCH_SIZE 8)
include(GoogleTest)
gtest_discover_tests(rpe_tests DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 900)

# Includes in src/ run downward along the data flow, without cycles (docs/layout.md).
add_test(NAME include_order COMMAND bash ${CMAKE_SOURCE_DIR}/tests/layout/test_check_includes.sh ${CMAKE_SOURCE_DIR})
# A LibTorch older than the sources support is refused at configure time, in one message.
add_test(NAME torch_version_floor COMMAND bash ${CMAKE_SOURCE_DIR}/tests/build/test_torch_version_floor.sh ${CMAKE_SOURCE_DIR})

# The CLI's exit codes and messages, end to end.
add_test(NAME cli_errors COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/test_cli_errors.sh $<TARGET_FILE:rpe-train>)

# Python for the parity tests: the project's .venv (with transformers), else the system's.
if(EXISTS "${CMAKE_SOURCE_DIR}/.venv/bin/python")
  set(RPE_TEST_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python")
else()
  find_package(Python3 COMPONENTS Interpreter)
  set(RPE_TEST_PYTHON "${Python3_EXECUTABLE}")
endif()
# The revision rpe-train records in results and checkpoints is the checkout's at build time
# (cmake/git_revision.cmake), not the one CMake was configured at.
add_test(NAME version_revision COMMAND bash -c "rev=$(git -C '${CMAKE_SOURCE_DIR}' describe --always --dirty 2>/dev/null || echo unknown); \
  '$<TARGET_FILE:rpe-train>' --version | head -1 | grep -qF \"($rev)\" || { echo \"--version: not ($rev)\"; exit 1; }")
# The developers' guide's size limits on src/ and bench/: no file over 400 lines, no function over 80.
add_test(NAME layout_limits COMMAND ${RPE_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/scripts/check_layout.py
         ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/bench)
# The GPU acceptance command in its CPU form (docs/gpu.md): dispatch tests, bf16 training of
# every method, the benchmark beside Hugging Face, all at tiny size, so it cannot rot.
add_test(NAME gpu_check_cpu_smoke COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/gpu_check.sh --cpu-smoke
         --build-dir ${CMAKE_BINARY_DIR} --python ${RPE_TEST_PYTHON})
set_tests_properties(gpu_check_cpu_smoke PROPERTIES TIMEOUT 600)
# The libraries scripts/pack_deps.sh carries to a GPU machine suffice to configure there
# (scripts/without_system_libs.sh hides the system's copies); 77 = skipped (no namespace/network).
add_test(NAME carried_deps COMMAND bash ${CMAKE_SOURCE_DIR}/tests/build/test_carried_deps.sh ${CMAKE_SOURCE_DIR} ${RPE_TEST_PYTHON})
set_tests_properties(carried_deps PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME symbol_clashes COMMAND ${RPE_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/tests/build/symbol_clashes.py $<TARGET_FILE:rpe-train>)
set_tests_properties(symbol_clashes PROPERTIES SKIP_RETURN_CODE 77)
# Its second stage (scripts/gpu_table2.sh, mini Table 2 on real data) on a slice of ../shared/data
# packed by scripts/pack_data.sh --sample; the plan's arithmetic against a hand-worked plan.
add_test(NAME gpu_table2_cpu_smoke COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reproduce/test_gpu_table2.sh
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} ${RPE_TEST_PYTHON})
set_tests_properties(gpu_table2_cpu_smoke PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
# A build carried to a GPU machine that has no time to build (scripts/pack_build.sh, gpu_env.sh).
add_test(NAME pack_build COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reproduce/test_pack_build.sh
         ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} ${RPE_TEST_PYTHON})
set_tests_properties(pack_build PROPERTIES TIMEOUT 450)
# One call on a machine lent by the call (scripts/gpu_call.sh): status, time limit, what is packed.
add_test(NAME gpu_call COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reproduce/test_gpu_call.sh ${CMAKE_SOURCE_DIR})
add_test(NAME table2_plan COMMAND ${RPE_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reproduce/test_table2_plan.py)
# The throughput report (bench/gpu_report.py): MFU, Hugging Face peers, medians of repeats, CPU rows.
add_test(NAME gpu_report COMMAND ${RPE_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/tests/reproduce/test_gpu_report.py)
# WordPiece parity with HF BertTokenizer on real text (skips, code 77, without transformers or ../shared/data).
add_test(NAME wordpiece_parity COMMAND ${RPE_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/tests/data/wordpiece_parity.py
         $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR}/../shared/data)
set_tests_properties(wordpiece_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
# prepare-data / train-tokenizer / tokenize end to end: summaries, no-op reruns, exit code 2 on bad input.
add_test(NAME data_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/data/test_data_cli.sh $<TARGET_FILE:rpe-train>
         ${CMAKE_SOURCE_DIR})
set_tests_properties(data_cli PROPERTIES TIMEOUT 300)
# scripts/download_data.sh offline against a file:// mirror built from ../shared/data: every GLUE
# task (MRPC split equal to GLUE's files), no-op rerun, one-line failures (skips, 77, without it).
add_test(NAME download_data COMMAND bash ${CMAKE_SOURCE_DIR}/tests/data/test_download_data.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(download_data PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# Hugging Face interop: parity of MLM logits with transformers 4.x (skipped, exit 77, when
# transformers is not installed: pip install 'transformers>=4.40,<5') and the CLI's errors.
add_executable(hf_probe tests/interop/hf_probe.cpp tests/interop/hf_probe_heads.cpp tests/test_models.cpp)
target_link_libraries(hf_probe PRIVATE rpe_core)
target_include_directories(hf_probe PRIVATE tests)
if(RPE_USE_PCH)
  target_precompile_headers(hf_probe REUSE_FROM rpe_core)
endif()
if(RPE_TEST_PYTHON)
  add_test(NAME hf_parity COMMAND "${RPE_TEST_PYTHON}" ${CMAKE_SOURCE_DIR}/tests/interop/hf_parity.py
           --rpe-train $<TARGET_FILE:rpe-train> --probe $<TARGET_FILE:hf_probe> --workdir ${CMAKE_BINARY_DIR}/hf_parity)
  set_tests_properties(hf_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # Fine-tuned models: export-hf as BertForQuestionAnswering / BertForSequenceClassification.
  add_test(NAME hf_heads_parity COMMAND "${RPE_TEST_PYTHON}" ${CMAKE_SOURCE_DIR}/tests/interop/hf_heads_parity.py
           --rpe-train $<TARGET_FILE:rpe-train> --probe $<TARGET_FILE:hf_probe> --workdir ${CMAKE_BINARY_DIR}/hf_heads_parity)
  set_tests_properties(hf_heads_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # DeBERTa's position bias against transformers' DisentangledSelfAttention, term by term.
  add_test(NAME hf_deberta_parity COMMAND "${RPE_TEST_PYTHON}" ${CMAKE_SOURCE_DIR}/tests/interop/hf_deberta_parity.py
           --probe $<TARGET_FILE:hf_probe>)
  set_tests_properties(hf_deberta_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
add_test(NAME hf_cli_errors COMMAND bash ${CMAKE_SOURCE_DIR}/tests/interop/test_hf_cli_errors.sh
         $<TARGET_FILE:rpe-train> $<TARGET_FILE:hf_probe>)
# The bad-input battery: every reader and command on inputs broken from valid ones (exit
# code, one stderr line naming the culprit, no partial output, no crash); owners' open cases xfail.
add_test(NAME bad_input_battery COMMAND ${RPE_TEST_PYTHON} ${CMAKE_SOURCE_DIR}/tests/cli/bad_input_battery.py
         $<TARGET_FILE:rpe-train> $<TARGET_FILE:hf_probe> ${CMAKE_SOURCE_DIR})
set_tests_properties(bad_input_battery PROPERTIES TIMEOUT 600)
# SQuAD scoring parity with an independent Python implementation of the official scripts,
# and the tiny end-to-end run (pretrain -> SQuAD sample -> tables). Python: <repo>/.venv.
add_test(NAME squad_reference_parity
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/eval/test_squad_parity.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR}/.venv/bin/python)
add_test(NAME finetune_tiny_e2e
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/finetune/tiny_e2e.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR}/.venv/bin/python)
set_tests_properties(squad_reference_parity finetune_tiny_e2e PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} TIMEOUT 600)
# The card's commands as typed (pretrain --config NAME, finetune squad with no options), the kept
# model, and predict squad/glue reproducing the fine-tuning run's scores.
add_test(NAME finetune_saved_model_e2e
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/finetune/saved_model_e2e.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR})
set_tests_properties(finetune_saved_model_e2e PROPERTIES TIMEOUT 600)
# Training at scale (optimizers, checkpoints, resume) and multi-process data parallelism; the
# distributed test launches the rpe-train binary as 2 ranks.
target_sources(rpe_tests PRIVATE
  tests/train/tiny_run.cpp
  tests/train/test_optim.cpp
  tests/train/test_decay_groups.cpp
  tests/train/test_foreach_adamw.cpp
  tests/train/test_host_sync.cpp
  tests/train/test_loss_scaler.cpp
  tests/train/test_checkpoint.cpp
  tests/train/test_run_dir.cpp
  tests/train/test_run_records.cpp
  tests/train/test_resume.cpp
  tests/train/test_stop_signal.cpp
  tests/train/test_mlm_eval.cpp
  tests/train/test_cuda_graphs.cpp
  tests/dist/test_data_parallel.cpp
  tests/dist/test_all_or_none.cpp
  tests/dist/test_rank0_only.cpp
  tests/dist/test_rendezvous.cpp
  tests/dist/test_sharded_eval.cpp
  tests/dist/test_gradient_hooks.cpp
)
add_dependencies(rpe_tests rpe-train)
# torchrun --no-python --nproc-per-node=2 on CPU against one process (skips without .venv/bin/torchrun).
add_test(NAME dist_torchrun COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/test_torchrun.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR})
set_tests_properties(dist_torchrun PROPERTIES SKIP_RETURN_CODE 77)
# A CUDA LibTorch finds NCCL where NCCL_ROOT says or stops at configure time, saying how (skips
# with a CPU-only LibTorch).
add_test(NAME nccl_configure COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/test_nccl_configure.sh ${CMAKE_SOURCE_DIR} ${RPE_TEST_PYTHON})
set_tests_properties(nccl_configure PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
# SIGKILL at random moments + --resume, repeatedly, ends bitwise equal to an uninterrupted run.
add_test(NAME train_kill_resume COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/test_kill_resume.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR})
# SIGTERM instead (a scheduler's preemption): each stop saves the step it ends after, same end.
add_test(NAME train_term_resume COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/test_kill_resume.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR} TERM)
# train.time_limit_min: exit 75 after a step with a checkpoint; --resume ends as if never stopped.
add_test(NAME train_time_limit COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/test_time_limit.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR})
# Corrupt/unchecked checkpoints refused by every loading command, run-folder refusals, full disk.
add_test(NAME checkpoint_cli COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/test_checkpoint_cli.sh $<TARGET_FILE:rpe-train> $<TARGET_FILE:hf_probe> ${CMAKE_SOURCE_DIR})
# The reproduction scripts end to end at tiny scale (Table 2 for absolute and m4, restart,
# `rpe-train inspect` against the checkpoint, Figures 4/5 as PNG). Python: <repo>/.venv.
add_test(NAME reproduce_args
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reproduce/test_reproduce_args.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR})
add_test(NAME reproduce_table2_tiny
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reproduce/test_table2_tiny.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR}/.venv/bin/python)
set_tests_properties(reproduce_table2_tiny PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} TIMEOUT 900)
# Tables 3, 4, 5 and the extrapolation sweep at tiny scale with a few steps, one seed.
add_test(NAME reproduce_tables345_tiny
  COMMAND bash ${CMAKE_SOURCE_DIR}/tests/reproduce/test_tables345_tiny.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR}/.venv/bin/python)
set_tests_properties(reproduce_tables345_tiny PROPERTIES WORKING_DIRECTORY ${CMAKE_SOURCE_DIR} TIMEOUT 1200)
