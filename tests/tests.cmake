# The GoogleTest suite: one executable, sources mirroring src/. Tests that need
# ../shared/data or a GPU skip cleanly when those are absent.
set(RPE_TEST_SOURCES
  tests/test_main.cpp
  tests/config/test_config.cpp
  tests/data/test_masking.cpp
  tests/model/test_model.cpp
  tests/model/attention/reference.cpp
  tests/model/attention/test_absolute.cpp
  tests/model/attention/test_sinusoid.cpp
  tests/model/attention/test_shaw.cpp
  tests/model/attention/test_transformer_xl.cpp
  tests/model/attention/test_m1.cpp
  tests/model/attention/test_m2.cpp
  tests/model/attention/test_m3.cpp
  tests/model/attention/test_m4.cpp
  tests/model/attention/test_t5_bias.cpp
  tests/model/attention/test_alibi.cpp
  tests/model/attention/test_rope.cpp
  tests/model/attention/test_deberta.cpp
  tests/model/attention/test_properties.cpp
  tests/model/attention/test_fused.cpp
  tests/model/attention/test_parameters.cpp
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
