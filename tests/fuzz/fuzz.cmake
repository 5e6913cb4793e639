# Fuzz targets of the readers of untrusted files (RPE_SANITIZE=ON, see scripts/fuzz_readers.sh):
# each is tests/fuzz/fuzz_readers.cpp with one RPE_FUZZ_<READER> and only the sources that
# reader needs, so the sanitizer build stays small (only safetensors links LibTorch).
# With clang they are libFuzzer targets; with another compiler the driver's own main()
# mutates the seeds (RPE_FUZZ_STANDALONE).
# The common sources log (atomic_file: a torn last line it cuts off): spdlog, and its fmt, link into every target.
set(_fuzz_common src/util/errors.cpp src/util/atomic_file.cpp src/util/atomic_writer.cpp src/util/file_tree.cpp src/util/input_file.cpp
                 src/util/json_text.cpp src/util/log.cpp src/util/unicode_space.cpp src/util/utf8.cpp)
set(RPE_FUZZ_yaml_SOURCES src/config/config.cpp src/config/validate.cpp src/config/yaml_tree.cpp src/config/config_names.cpp src/config/model_size.cpp)
set(RPE_FUZZ_yaml_LIBS yaml-cpp PkgConfig::UTF8PROC)
set(RPE_FUZZ_corpus_SOURCES src/data/corpus.cpp src/data/text_reader.cpp src/data/hashed_input.cpp src/data/shard.cpp)
set(RPE_FUZZ_corpus_LIBS PkgConfig::UTF8PROC ZLIB::ZLIB)
set(RPE_FUZZ_glue_SOURCES src/finetune/glue_data.cpp src/data/corpus.cpp src/data/text_reader.cpp src/data/hashed_input.cpp src/data/shard.cpp)
set(RPE_FUZZ_glue_LIBS PkgConfig::UTF8PROC ZLIB::ZLIB)
set(RPE_FUZZ_squad_SOURCES src/finetune/squad_data.cpp)
set(RPE_FUZZ_squad_LIBS nlohmann_json::nlohmann_json PkgConfig::UTF8PROC)
set(RPE_FUZZ_shard_SOURCES src/data/shard.cpp)
set(RPE_FUZZ_shard_LIBS PkgConfig::UTF8PROC)
set(RPE_FUZZ_safetensors_SOURCES src/interop/safetensors.cpp)
set(RPE_FUZZ_safetensors_LIBS ${TORCH_LIBRARIES} nlohmann_json::nlohmann_json PkgConfig::UTF8PROC)
set(RPE_FUZZ_READERS yaml corpus glue squad shard safetensors)

foreach(reader IN LISTS RPE_FUZZ_READERS)
  string(TOUPPER "${reader}" _upper)
  add_executable(fuzz_${reader} EXCLUDE_FROM_ALL tests/fuzz/fuzz_readers.cpp ${_fuzz_common} ${RPE_FUZZ_${reader}_SOURCES})
  target_include_directories(fuzz_${reader} PRIVATE src "${CMAKE_BINARY_DIR}/generated")
  target_compile_definitions(fuzz_${reader} PRIVATE RPE_FUZZ_${_upper})
  target_link_libraries(fuzz_${reader} PRIVATE ${RPE_FUZZ_${reader}_LIBS} spdlog::spdlog)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(fuzz_${reader} PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_${reader} PRIVATE -fsanitize=fuzzer)
  else()
    target_compile_definitions(fuzz_${reader} PRIVATE RPE_FUZZ_STANDALONE)
  endif()
endforeach()
# The PyPI libtorch.so exports broken copies of std::filesystem functions (see rpe_core).
target_link_options(fuzz_safetensors PRIVATE "LINKER:--push-state,--no-as-needed" "-lstdc++" "LINKER:--pop-state")
add_custom_target(fuzz_readers)
foreach(reader IN LISTS RPE_FUZZ_READERS)
  add_dependencies(fuzz_readers fuzz_${reader})
endforeach()
