# The GoogleTest suite: one executable, sources mirroring src/. Tests that need
# ../shared/data or a GPU skip cleanly when those are absent.
set(RPE_TEST_SOURCES
  tests/test_main.cpp
  tests/config/test_config.cpp
  tests/data/test_masking.cpp
  tests/model/test_model.cpp
  tests/model/attention/test_m4.cpp
  tests/train/test_training.cpp
  tests/train/test_pretrain_smoke.cpp
)
add_executable(rpe_tests ${RPE_TEST_SOURCES})
target_link_libraries(rpe_tests PRIVATE rpe_core GTest::gtest)
target_compile_definitions(rpe_tests PRIVATE RPE_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
if(RPE_USE_PCH)
  target_precompile_headers(rpe_tests REUSE_FROM rpe_core)
endif()
include(GoogleTest)
gtest_discover_tests(rpe_tests DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 900)

# The CLI's exit codes and messages, end to end.
add_test(NAME cli_errors COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli/test_cli_errors.sh $<TARGET_FILE:rpe-train>)

# Training at scale (optimizers, checkpoints, resume) and multi-process data parallelism; the
# distributed test launches the rpe-train binary as 2 ranks.
target_sources(rpe_tests PRIVATE
  tests/train/tiny_run.cpp
  tests/train/test_optim.cpp
  tests/train/test_checkpoint.cpp
  tests/train/test_resume.cpp
  tests/dist/test_data_parallel.cpp
)
add_dependencies(rpe_tests rpe-train)
target_compile_definitions(rpe_tests PRIVATE RPE_TRAIN_BINARY="$<TARGET_FILE:rpe-train>")
# torchrun --no-python --nproc-per-node=2 on CPU against one process (skips without .venv/bin/torchrun).
add_test(NAME dist_torchrun COMMAND bash ${CMAKE_SOURCE_DIR}/tests/dist/test_torchrun.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR})
# SIGKILL at random moments + --resume, repeatedly, ends bitwise equal to an uninterrupted run.
add_test(NAME train_kill_resume COMMAND bash ${CMAKE_SOURCE_DIR}/tests/train/test_kill_resume.sh $<TARGET_FILE:rpe-train> ${CMAKE_SOURCE_DIR})
