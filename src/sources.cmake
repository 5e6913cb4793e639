# Source lists of rpe-train, in the order data flows through the system:
# config -> corpus -> tokenizer -> sequences -> masking -> model(attention) -> trainer -> checkpoint.
set(RPE_CORE_SOURCES
  # utilities: errors, logging, atomic files
  src/util/errors.cpp
  src/util/log.cpp
  src/util/atomic_file.cpp
  src/util/atomic_writer.cpp
  src/util/file_tree.cpp
  src/util/file_lock.cpp
  src/util/stop_signals.cpp
  src/util/device.cpp
  src/util/kernel_check.cpp
  src/util/cpu_memory.cpp
  src/util/input_file.cpp
  src/util/json_text.cpp
  src/util/unicode_space.cpp
  src/util/utf8.cpp
  # config: the only place that knows YAML
  src/config/config.cpp
  src/config/validate.cpp
  src/config/yaml_tree.cpp
  src/config/config_names.cpp
  src/config/shell_vars.cpp
  src/config/model_size.cpp
  # data: corpus -> tokenizer -> packed sequences -> masked batches
  src/data/text_reader.cpp
  src/data/hashed_input.cpp
  src/data/corpus.cpp
  src/data/sp_tokenizer.cpp
  src/data/bert_basic_tokenizer.cpp
  src/data/wordpiece_tokenizer.cpp
  src/data/tokenizer_factory.cpp
  src/data/shard.cpp
  src/data/packing.cpp
  src/data/masking.cpp
  src/data/mlm_dataset.cpp
  src/data/chunk_pipeline.cpp
  src/data/prepare.cpp
  src/data/manifest.cpp
  src/data/prepared_shards.cpp
  src/data/verified_stamp.cpp
  src/data/cache_dir.cpp
  src/data/shard_sequences.cpp
  src/data/pretrain_corpus.cpp
  # model: position methods behind one interface (src/model/attention/, globbed below), encoder, BERT
  src/model/add_norm.cpp
  src/model/recompute.cpp
  src/model/saved_mask.cpp
  src/model/encoder.cpp
  src/model/bert.cpp
  # distributed: process group, parameter broadcast, bucketed gradient all-reduce
  src/dist/all_or_none.cpp
  src/dist/data_parallel.cpp
  src/dist/grad_sync.cpp
  src/dist/launch_env.cpp
  src/dist/rank0_only.cpp
  src/dist/rendezvous.cpp
  src/dist/replica_check.cpp
  src/dist/sharded_eval.cpp
  # training: optimizer + schedule, checkpoint, metrics, trainer
  src/train/lamb.cpp
  src/train/foreach_adamw.cpp
  src/train/optim.cpp
  src/train/checkpoint_file.cpp
  src/train/checkpoint.cpp
  src/train/run_dir.cpp
  src/train/metrics.cpp
  src/train/loss_scaler.cpp
  src/train/engine.cpp
  src/train/engine_stops.cpp
  src/train/engine_report.cpp
  src/train/gradients.cpp
  src/train/cuda_graph.cpp
  src/train/micro_step_graph.cpp
  src/train/mlm_task.cpp
  src/train/trainer.cpp
  # interop: Hugging Face BERT (safetensors, config and name mapping), method swap
  src/interop/safetensors.cpp
  src/interop/model_file.cpp
  src/interop/hf_bert.cpp
  src/interop/hf_bert_import.cpp
  src/interop/hf_folder.cpp
  src/interop/method_swap.cpp
  # evaluation: official SQuAD/GLUE metrics, result lines, tables
  src/eval/squad_metrics.cpp
  src/eval/glue_metrics.cpp
  src/eval/results.cpp
  src/eval/pretrain_labels.cpp
  src/eval/table_cells.cpp
  src/eval/table_render.cpp
  src/eval/tables.cpp
  src/eval/text_table.cpp
  src/eval/cost_table.cpp
  src/eval/squad_tables.cpp
  # fine-tuning: SQuAD/GLUE data -> heads -> loop -> post-processing -> metrics
  src/finetune/squad_data.cpp
  src/finetune/squad_postprocess.cpp
  src/finetune/glue_data.cpp
  src/finetune/heads.cpp
  src/finetune/prepare.cpp
  src/finetune/seed_run.cpp
  src/finetune/resume.cpp
  src/finetune/squad_task.cpp
  src/finetune/glue_task.cpp
  src/finetune/saved_model.cpp
  src/finetune/finetune.cpp
  src/finetune/predict.cpp
  src/finetune/export_hf.cpp
)
# Every file of src/model/attention/ (the interface, the registry, the attention core and one
# file per position method): adding a method is its file, its registry entry, its config
# fragment and its test (docs/layout.md), with no list here to extend.
file(GLOB RPE_ATTENTION_SOURCES CONFIGURE_DEPENDS RELATIVE ${CMAKE_SOURCE_DIR}
     ${CMAKE_SOURCE_DIR}/src/model/attention/*.cpp)
list(SORT RPE_ATTENTION_SOURCES)
list(APPEND RPE_CORE_SOURCES ${RPE_ATTENTION_SOURCES})

set(RPE_CLI_SOURCES
  src/cli/main.cpp
  src/cli/cmd_version.cpp
  src/cli/cmd_dump_config.cpp
  src/cli/cmd_pretrain.cpp
  src/cli/cmd_tokenize.cpp
  src/cli/cmd_prepare_data.cpp
  src/cli/cmd_train_tokenizer.cpp
  src/cli/cmd_import_hf.cpp
  src/cli/cmd_export_hf.cpp
  src/cli/cmd_inspect.cpp
  src/cli/cmd_swap_method.cpp
  src/cli/cmd_finetune.cpp
  src/cli/cmd_predict.cpp
  src/cli/cmd_tables.cpp
  src/cli/cmd_evaluate.cpp
  src/cli/cmd_methods.cpp
)
