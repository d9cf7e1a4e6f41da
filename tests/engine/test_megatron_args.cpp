// A Megatron-LM launch read as a pipescope configuration (engine/model/megatron_args.h): the CI
// tests' model_config.yaml files read into exactly the configurations of their validation rows
// (two independent mappings of the same launch agreeing), a shell script read as its YAML twin,
// Megatron-LM's defaults where the arguments are silent, and one named error per bad launch.
#include <QtTest>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/model/megatron_args.h"
#include "engine/model/megatron_log.h"
#include "engine/model/validation.h"
#include "engine/plan_file.h"

using namespace pipescope;
using nlohmann::json;

namespace {

// A file of the source tree, whole ("" when it cannot be read; the tests check for that).
std::string readSource(const std::string &path) {
  std::ifstream in(std::string(PIPESCOPE_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string readData(const std::string &name) {
  return readSource("tests/data/megatron_ci/" + name);
}

// A validation set's rows.
json validationRows(const std::string &set) {
  return json::parse(readSource("resources/validation/" + set + ".json"))["rows"];
}

MegatronTranslation translated(const std::string &text, int gpus) {
  auto arguments = parseMegatronArguments(text);
  if (!arguments) qFatal("%s", arguments.error().message.c_str());
  MegatronTarget target;
  target.gpus = gpus;
  auto translation = translateMegatronArguments(*arguments, target);
  if (!translation) qFatal("%s", translation.error().message.c_str());
  return *translation;
}

// The plan a configuration makes, as its file holds it, the model's name aside.
json planOf(json row) {
  row["model"]["name"] = "any";
  auto configuration = configurationFromJson(row, "");
  if (!configuration) qFatal("%s", configuration.error().message.c_str());
  return planToJson(validationCasePlan(*configuration));
}

std::string errorOf(const std::string &text, int gpus = 8) {
  auto arguments = parseMegatronArguments(text);
  if (!arguments) return arguments.error().message;
  MegatronTarget target;
  target.gpus = gpus;
  auto translation = translateMegatronArguments(*arguments, target);
  return translation ? std::string() : translation.error().message;
}

const char *kSmall = "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
                     "--seq-length 2048 --vocab-size 1000 ";

} // namespace

class TestMegatronArgs : public QObject {
  Q_OBJECT

private slots:
  // Each CI launch reads into its validation row's configuration, field for field.
  void ciLaunchesReadAsTheirRows() {
    auto set = loadValidationSet("megatron-lm-ci-h100");
    QVERIFY2(set, set ? "" : set.error().message.c_str());
    const std::pair<const char *, const char *> launches[] = {
        {"gpt3_7b_tp4_pp1_memory_speed.model_config.yaml", "gpt3-7b-tp4-pp1"},
        {"gpt3_7b_tp1_pp4_memory_speed.model_config.yaml", "gpt3-7b-tp1-pp4"},
        {"gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed.model_config.yaml", "gpt3-moe-tp2-pp2-ep4"},
        {"gpt3_mcore_te_tp2_pp2_ep4_etp1_mtp_resume_torch_dist_fp8.model_config.yaml",
         "gpt3-moe-tp2-pp2-ep4-fp8"},
        {"gpt3_mcore_te_tp2_pp2_ep4_etp1_selective_recompute_experimental.model_config.yaml",
         "gpt3-moe-tp2-pp2-ep4-selective-recompute"}};
    const json rows = validationRows("megatron-lm-ci-h100");
    for (const auto &[file, id] : launches) {
      const std::string text = readData(file);
      QVERIFY2(!text.empty(), file);
      const MegatronTranslation translation = translated(text, 8);
      json row;
      for (const auto &candidate : rows)
        if (candidate["id"] == id) row = candidate;
      QVERIFY2(!row.is_null(), id);
      const json expected = planOf(row), got = planOf(translation.row);
      QVERIFY2(expected == got,
               qPrintable(QString::fromStdString(std::string(id) + "\nrow:   " + expected.dump() +
                                                 "\nlaunch: " + got.dump())));
      // What the launch sets that pipescope does not price is named, the rest listed.
      const auto &unpriced = translation.not_priced;
      const auto names = [](const std::vector<std::string> &lines, const std::string &name) {
        return std::any_of(lines.begin(), lines.end(),
                           [&](const std::string &line) { return line.starts_with(name); });
      };
      if (std::string(id).starts_with("gpt3-7b")) {
        QVERIFY(names(unpriced, "--deterministic-mode"));
        // Priced: the row runs without the fusion too.
        QVERIFY(!names(unpriced, "--no-gradient-accumulation-fusion"));
        QVERIFY(!translation.row["training"]["gradient_accumulation_fusion"].get<bool>());
      } else {
        QVERIFY(names(unpriced, "--qk-layernorm"));
      }
      QVERIFY(names(translation.not_read, "--lr"));
      QVERIFY(!names(translation.not_read, "--num-layers"));
    }
  }

  // Megatron-MoE-ModelZoo's Qwen3-235B-A22B launches, filled in as its sbatch_benchmarking.sh
  // fills them, read into exactly the configurations of their validation rows.
  void modelZooLaunchesReadAsTheirRows() {
    struct Launch {
      const char *id;
      int tp, pp, vpp, ep;
      const char *extra; // run_235b.sh's and sbatch_benchmarking.sh's arguments
    };
    const std::string selective = "--recompute-granularity selective --recompute-modules moe_act "
                                  "layernorm --moe-router-force-load-balancing ";
    const std::string deepep = "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend "
                               "deepep --tp-comm-overlap ";
    const std::string extras[] = {
        selective + deepep,
        selective + deepep + "--delay-wgrad-compute --overlap-moe-expert-parallel-comm",
        selective + "--moe-token-dispatcher-type alltoall --tp-comm-overlap",
        "--moe-router-force-load-balancing " + deepep};
    const Launch launches[] = {
        {"qwen3-235b-a22b-ep32-deepep", 2, 8, 4, 32, extras[0].c_str()},
        {"qwen3-235b-a22b-ep32-deepep-a2a-overlap", 2, 8, 4, 32, extras[1].c_str()},
        {"qwen3-235b-a22b-ep8-a2a-pp32", 2, 32, 3, 8, extras[2].c_str()},
        {"qwen3-235b-a22b-ep8-deepep-tp4", 4, 8, 4, 8, extras[3].c_str()}};
    const std::string config = readSource("tests/data/megatron_moe_modelzoo/Qwen3-235B-A22B.yaml");
    QVERIFY(!config.empty());
    const json rows = validationRows("megatron-moe-modelzoo-h100");
    for (const Launch &launch : launches) {
      std::string text = config;
      const std::pair<std::string, std::string> values[] = {
          {"${TP}", std::to_string(launch.tp)},
          {"${PP}", std::to_string(launch.pp)},
          {"${EP}", std::to_string(launch.ep)},
          {"${CP}", "1"},
          {"${MBS}", "1"},
          {"${GBS}", "2048"},
          {"${SEQ_LEN}", "4096"},
          {"${MOE_GROUPED_GEMM}", "true"},
          {"${LAYERS_PER_VP}", std::to_string(96 / (launch.pp * launch.vpp))}};
      for (const auto &[key, value] : values)
        for (auto at = text.find(key); at != std::string::npos; at = text.find(key))
          text.replace(at, key.size(), value);
      // The appended arguments, as YAML entries of MODEL_ARGS (a flag is true).
      std::string appended;
      std::istringstream words(launch.extra);
      std::string word, entry;
      while (words >> word) {
        if (word.starts_with("--")) {
          if (!entry.empty()) appended += entry + (entry.ends_with(":") ? " true\n" : "\n");
          entry = "  " + word + ":";
        } else {
          entry += " " + word;
        }
      }
      appended += entry + (entry.ends_with(":") ? " true\n" : "\n");
      text.replace(text.find("MODEL_ARGS:\n"), 12, "MODEL_ARGS:\n" + appended);
      auto arguments = parseMegatronArguments(text);
      QVERIFY(arguments.ok());
      MegatronTarget target;
      target.gpus = 256;
      target.vocab = 151936; // Qwen3's tokenizer
      auto translation = translateMegatronArguments(*arguments, target);
      QVERIFY2(translation.ok(), translation ? "" : translation.error().message.c_str());
      json row;
      for (const auto &candidate : rows)
        if (candidate["id"] == launch.id) row = candidate;
      QVERIFY2(!row.is_null(), launch.id);
      const json expected = planOf(row), got = planOf(translation->row);
      QVERIFY2(expected == got, qPrintable(QString::fromStdString(std::string(launch.id) +
                                                                  "\nrow:    " + expected.dump() +
                                                                  "\nlaunch: " + got.dump())));
    }
  }

  // The same launch as a torchrun script (continuations, quotes, an argument variable, an
  // exported NCCL_ALGO, --name=value) reads as the YAML does, the GPUs from torchrun.
  void aScriptReadsAsItsYaml() {
    const std::string script = R"(#!/bin/bash
export NCCL_ALGO=Ring
MODEL="--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention --num-query-groups 8"
torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py \
    $MODEL \
    --untie-embeddings-and-output-weights \
    --micro-batch-size 2 --global-batch-size=8 \
    --seq-length 8192 --max-position-embeddings 8192 \
    --tokenizer-type NullTokenizer --vocab-size 131073 \
    --tensor-model-parallel-size 4 --pipeline-model-parallel-size 1 \
    --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \
    --no-gradient-accumulation-fusion \
    --bf16 --lr 0.00015   # a comment
)";
    const MegatronTranslation yaml =
        translated(readData("gpt3_7b_tp4_pp1_memory_speed.model_config.yaml"), 8);
    const MegatronTranslation shell = translated(script, 0);
    QCOMPARE(planOf(shell.row).dump(), planOf(yaml.row).dump());
    QCOMPARE(shell.row["mesh"]["gpus_per_node"].get<int>(), 8);
  }

  // Megatron-LM's own example scripts, as people copy them: variables, arrays, quoted argument
  // pairs, arithmetic; the world size from torchrun or from --gpus; a hybrid model refused.
  void megatronExampleScriptsRead() {
    const auto example = [](const std::string &name) {
      return readSource("tests/data/megatron_examples/" + name);
    };
    const MegatronTranslation llama = translated(example("train_llama3_8b_h100_fp8.sh"), 0);
    const json &model = llama.row["model"];
    QCOMPARE(model["layers"].get<int>(), 32); // NUM_LAYERS=32
    QCOMPARE(model["hidden"].get<int>(), 4096);
    QCOMPARE(model["ffn_hidden"].get<int>(), 14336);
    QCOMPARE(model["kv_heads"].get<int>(), 8);
    QCOMPARE(model["sequence_length"].get<int>(), 8192); // SEQ_LENGTH=8192
    QVERIFY(!model["dropout"].get<bool>());
    QCOMPARE(llama.row["mesh"]["dp"].get<int>(), 8); // torchrun --nproc_per_node $GPUS_PER_NODE
    QCOMPARE(llama.row["schedule"]["microbatches"].get<int>(), 16); // 128 / (1 × 8)
    // "--fp8-format hybrid" is one quoted array element, split as the shell splits it.
    QCOMPARE(llama.row["training"]["gemm_precision"].get<std::string>(), std::string("fp8"));
    QVERIFY(llama.row["training"]["fp8_params"].get<bool>());      // "--fp8-param-gather"
    QVERIFY(!llama.row["training"]["fp32_gradients"].get<bool>()); // --grad-reduce-in-bf16
    QCOMPARE(llama.row["training"]["cross_entropy"].get<std::string>(),
             std::string("vocab-parallel"));

    // 8 GPUs from torchrun cannot hold TP 8 × PP 16. The script gives both --global-batch-size
    // 1536 and --step-batch-size-schedule "0:16 ... 12B:1536", which Megatron-LM at that commit
    // refuses (arguments.py: "Cannot specify both"): refused here too, naming both.
    const std::string gpt3 = example("train_gpt3_175b_distributed.sh");
    QVERIFY(errorOf(gpt3, 0).find("TP 8 × PP 16") != std::string::npos);
    QVERIFY(errorOf(gpt3, 128).find("--step-batch-size-schedule and --global-batch-size") !=
            std::string::npos);
    // Without the fixed batch, on 128 GPUs it reads, at the schedule's first batch, 16.
    std::string scheduled = gpt3;
    const auto fixed = scheduled.find("--global-batch-size 1536");
    QVERIFY(fixed != std::string::npos);
    scheduled.erase(fixed, std::string("--global-batch-size 1536").size());
    const MegatronTranslation big = translated(scheduled, 128);
    QCOMPARE(big.row["model"]["layers"].get<int>(), 96);
    QCOMPARE(big.row["model"]["dtype"].get<std::string>(), std::string("fp16"));
    QCOMPARE(big.row["schedule"]["microbatches"].get<int>(), 16); // 16 / (1 × DP 1)
    QCOMPARE(big.row["model"]["vocab"].get<int>(), 51200); // GPT-2's 50,257 padded to 128 × 8

    QVERIFY(errorOf(example("mamba_train.sh")).find("pretrain_hybrid.py") != std::string::npos);

    // Expansions: defaults, := assignment, arithmetic, nested braces left alone when unknown.
    const MegatronTranslation expanded = translated(
        "N=4\nL=${LAYERS:-2}\n: ${H:=1024}\nW=$(( ($N * $L) / 2 + 4 ))\n"
        "torchrun pretrain_gpt.py --num-layers $W --hidden-size ${H} --num-attention-heads 16 "
        "--seq-length $((1024*2)) --vocab-size 100 --micro-batch-size ${MBS:-1}\n",
        1);
    QCOMPARE(expanded.row["model"]["layers"].get<int>(), 8);
    QCOMPARE(expanded.row["model"]["hidden"].get<int>(), 1024);
    QCOMPARE(expanded.row["model"]["sequence_length"].get<int>(), 2048);
    // Arrays written on one line: the first element is not lost to NAME=(, the last keeps no
    // parenthesis; an arithmetic element inside one closes nothing.
    const MegatronTranslation arrays =
        translated("A=(--num-layers $((2*3)) --hidden-size 1024)\nB=(--num-attention-heads 16\n"
                   "  --seq-length 2048)\nC=(--vocab-size 100)\n"
                   "torchrun pretrain_gpt.py ${A[@]} ${B[@]} \"${C[@]}\" --micro-batch-size 2\n",
                   1);
    QCOMPARE(arrays.row["model"]["layers"].get<int>(), 6);
    QCOMPARE(arrays.row["model"]["hidden"].get<int>(), 1024);
    QCOMPARE(arrays.row["model"]["heads"].get<int>(), 16);
    QCOMPARE(arrays.row["model"]["sequence_length"].get<int>(), 2048);
    QCOMPARE(arrays.row["model"]["microbatch_size"].get<int>(), 2);
    QVERIFY(errorOf(std::string(kSmall) + "--seq-length $(( 4 / 0 ))").find("shell variable") !=
            std::string::npos);
    // Parentheses nested past any script's are refused, not recursed into without end.
    const std::string deep =
        "$((" + std::string(100000, '(') + "1" + std::string(100000, ')') + "))";
    QVERIFY(errorOf(std::string(kSmall) + "--seq-length " + deep).find("--seq-length") !=
            std::string::npos);
  }

  // Megatron-LM's defaults where the arguments are silent, each listed.
  void silentArgumentsTakeMegatronsDefaults() {
    const MegatronTranslation t = translated(std::string(kSmall) + "--swiglu", 1);
    const json &model = t.row["model"];
    QCOMPARE(model["ffn_hidden"].get<int>(), 2688); // int(4·1024·2/3 / 64) · 64
    QCOMPARE(model["vocab"].get<int>(), 1024);      // 1000 + 1 padded to 128
    QCOMPARE(model["position_embeddings"].get<int>(), 2048);
    QCOMPARE(model["norm"].get<std::string>(), std::string("layernorm"));
    QVERIFY(model["linear_biases"].get<bool>());
    QVERIFY(model["tied_embeddings"].get<bool>());
    QVERIFY(model["dropout"].get<bool>());
    QCOMPARE(model["dtype"].get<std::string>(), std::string("fp32"));
    QCOMPARE(model["attention"].get<std::string>(), std::string("flash"));
    QCOMPARE(t.row["schedule"]["microbatches"].get<int>(), 1);
    QCOMPARE(t.row["training"]["cross_entropy"].get<std::string>(),
             std::string("vocab-parallel-unfused"));
    QCOMPARE(t.row["training"]["zero_stage"].get<int>(), 0);
    // SwiGLU fused unless the launch says --no-bias-swiglu-fusion, which keeps silu's output too
    // (its memory priced, its extra passes named as not).
    QVERIFY(!t.row["training"].contains("swiglu_fusion"));
    const MegatronTranslation eager =
        translated(std::string(kSmall) + "--swiglu --no-bias-swiglu-fusion", 1);
    QCOMPARE(eager.row["training"]["swiglu_fusion"].get<bool>(), false);
    QVERIFY(std::any_of(eager.not_priced.begin(), eager.not_priced.end(), [](const auto &line) {
      return line.starts_with("--no-bias-swiglu-fusion: ");
    }));
    QVERIFY(t.assumed.size() >= 3);
    // The output layer's deferred weight gradients (NeMo's and MLPerf's recipes set them) are
    // named as not priced, not dropped among the arguments not read.
    const MegatronTranslation deferred = translated(
        std::string(kSmall) + "--pipeline-model-parallel-size 2 --global-batch-size 8 "
                              "--defer-embedding-wgrad-compute --wgrad-deferral-limit 22",
        2);
    for (const char *name : {"--defer-embedding-wgrad-compute: ", "--wgrad-deferral-limit: "}) {
      QVERIFY2(std::any_of(deferred.not_priced.begin(), deferred.not_priced.end(),
                           [&](const auto &line) { return line.starts_with(name); }),
               name);
      QVERIFY(std::none_of(deferred.not_read.begin(), deferred.not_read.end(),
                           [&](const auto &line) { return line.starts_with(name); }));
    }
    // The loss: Megatron's fused one, or Transformer Engine's when the launch asks for it.
    const auto loss = [](const std::string &arguments) {
      return translated(std::string(kSmall) + arguments, 1)
          .row["training"]["cross_entropy"]
          .get<std::string>();
    };
    QCOMPARE(loss("--cross-entropy-loss-fusion"), std::string("vocab-parallel"));
    QCOMPARE(loss("--cross-entropy-loss-fusion --cross-entropy-fusion-impl native"),
             std::string("vocab-parallel"));
    QCOMPARE(loss("--cross-entropy-loss-fusion --cross-entropy-fusion-impl te"), std::string("te"));
    QCOMPARE(loss("--cross-entropy-fusion-impl te"), std::string("vocab-parallel-unfused"));

    // The pipeline split options become Megatron's layout; GPT-2 BPE files give its vocabulary.
    const MegatronTranslation split =
        translated("--num-layers 30 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
                   "--vocab-file gpt2-vocab.json --pipeline-model-parallel-size 4 "
                   "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split "
                   "--global-batch-size 8",
                   8);
    QCOMPARE(split.row["training"]["layout"].get<std::string>(),
             std::string("Ettttttt|tttttttt|tttttttt|tttttttL"));
    QCOMPARE(split.row["model"]["vocab"].get<int>(), 50304);
    QCOMPARE(split.row["mesh"]["dp"].get<int>(), 2);
    QCOMPARE(split.row["schedule"]["microbatches"].get<int>(), 4);
    const MegatronTranslation interleaved =
        translated(std::string(kSmall) +
                       "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage "
                       "1 --global-batch-size 8 --recompute-granularity full --fp8-format hybrid "
                       "--use-torch-fsdp2",
                   4);
    QCOMPARE(interleaved.row["schedule"]["name"].get<std::string>(),
             std::string("interleaved-1f1b"));
    QCOMPARE(interleaved.row["schedule"]["virtual_stages"].get<int>(), 2);
    QCOMPARE(interleaved.row["training"]["recompute"].get<std::string>(), std::string("full"));
    QCOMPARE(interleaved.row["training"]["gemm_precision"].get<std::string>(), std::string("fp8"));
    QCOMPARE(interleaved.row["training"]["zero_stage"].get<int>(), 3);
    QVERIFY(!interleaved.row["training"].contains("fp8_params"));
    // --fp8-param-gather: the weights held in FP8 (no 16-bit copy beside TE's cast).
    const MegatronTranslation fp8_params = translated(
        std::string(kSmall) + "--global-batch-size 8 --fp8-format hybrid --fp8-param-gather", 8);
    QVERIFY(fp8_params.row["training"]["fp8_params"].get<bool>());
  }

  // A real Megatron-LM log (pretrain_gpt.py on one H100, tests/data/megatron_h100_run): the
  // arguments block reads as the launch that wrote it, the vocabulary as the run padded it (this
  // Megatron-LM's NullTokenizer keeps --vocab-size), and the measured step as the median of the
  // iteration lines after the first fifth.
  void aTrainingLogReadsAsItsLaunch() {
    const std::string text = readSource("tests/data/megatron_h100_run/train_gpt_1.7b.log");
    QVERIFY(looksLikeMegatronLog(text));
    QVERIFY(!looksLikeMegatronLog(readSource("tests/data/megatron_h100_run/train_gpt_1.7b.sh")));
    auto log = parseMegatronLog(text);
    QVERIFY2(log, log ? "" : log.error().message.c_str());
    QCOMPARE(log->logged_arguments, 834);
    QCOMPARE(log->world_size, 1);
    QCOMPARE(log->tokenizer_vocab, 131072LL);
    QCOMPARE(log->iterations.size(), std::size_t{40});
    QCOMPARE(log->iterations.front().iteration, 1LL);
    QCOMPARE(log->iterations.back().iteration, 40LL);
    QCOMPARE(log->iterations.back().elapsed_ms, 1018.5);
    auto step = measuredStep(log->iterations);
    QVERIFY(step);
    QCOMPARE(step->skipped, 8);
    QCOMPARE(step->kept, 32);
    QCOMPARE(step->first_kept, 9LL);
    QCOMPARE(step->last_kept, 40LL);
    QVERIFY(std::abs(step->step_s - 1.22685) < 1e-9);
    QVERIFY(step->fastest_s <= step->step_s && step->step_s <= step->slowest_s);

    MegatronTarget target;
    target.gpus = log->world_size;
    target.vocab = static_cast<int>(log->tokenizer_vocab);
    auto from_log = launchFromArguments(log->arguments, target);
    QVERIFY2(from_log, from_log ? "" : from_log.error().message.c_str());
    // The launch script that ran, with the vocabulary the run padded: the same configuration.
    target.gpus = 0;
    auto from_script =
        readMegatronLaunch(readSource("tests/data/megatron_h100_run/train_gpt_1.7b.sh"), target);
    QVERIFY2(from_script, from_script ? "" : from_script.error().message.c_str());
    QCOMPARE(planOf(from_log->translation.row).dump(), planOf(from_script->translation.row).dump());
    const json &model = from_log->translation.row["model"];
    QCOMPARE(model["attention"].get<std::string>(), std::string("materialized"));
    QCOMPARE(model["vocab"].get<int>(), 131072);
    QCOMPARE(from_log->translation.row["mesh"]["gpus_per_node"].get<int>(), 1);
    // The defaults of features the run does not use are not named (no rotary embeddings: no
    // --no-rope-fusion; no experts: no --moe-* settings).
    std::string unpriced;
    for (const auto &line : from_log->translation.not_priced)
      unpriced += line + "\n";
    // The two fusions the run turned off are priced, not listed as unpriced.
    const json &training = from_log->translation.row["training"];
    QVERIFY(!training["gradient_accumulation_fusion"].get<bool>());
    QVERIFY(!training["masked_softmax_fusion"].get<bool>());
    QVERIFY2(unpriced.find("fusion") == std::string::npos, unpriced.c_str());
    QVERIFY2(unpriced.find("rope") == std::string::npos, unpriced.c_str());
    QVERIFY2(unpriced.find("--moe") == std::string::npos, unpriced.c_str());

    // The second run: two sequences a microbatch.
    auto mbs2 =
        parseMegatronLog(readSource("tests/data/megatron_h100_run/train_gpt_1.7b_mbs2.log"));
    QVERIFY(mbs2);
    QCOMPARE(mbs2->iterations.size(), std::size_t{30});
    QVERIFY(std::abs(measuredStep(mbs2->iterations)->step_s - 1.50315) < 1e-9);
    target.gpus = mbs2->world_size;
    auto read2 = launchFromArguments(mbs2->arguments, target);
    QVERIFY(read2);
    QCOMPARE(read2->translation.row["model"]["microbatch_size"].get<int>(), 2);
  }

  // What a log's block says, line by line: launcher prefixes, lists, enums, flags turned off;
  // and what it cannot say.
  void logBlocksAndTheirFaults() {
    const std::string block =
        "[rank0]: ------------------------ arguments ------------------------\n"
        "[rank0]:   num_layers ...................................... 4\n"
        "[rank0]:   hidden_size ..................................... 1024\n"
        "  num_attention_heads ............................. 16\n"
        "  seq_length ...................................... 2048\n"
        "  vocab_size ...................................... 1000\n"
        "  tokenizer_type .................................. NullTokenizer\n"
        "  recompute_modules ............................... ['core_attn', 'mlp']\n"
        "  recompute_granularity ........................... selective\n"
        "  attention_backend ............................... AttnBackend.flash\n"
        "  add_bias_linear ................................. False\n"
        "  swiglu .......................................... True\n"
        "  num_experts ..................................... None\n"
        "  moe_router_topk ................................. 2\n"
        "  world_size ...................................... 16\n"
        "  encoder_num_layers .............................. 4\n"
        "-------------------- end of arguments ---------------------\n";
    auto log = parseMegatronLog(block + " iteration        1/      10 | elapsed time per "
                                        "iteration (ms): 900.5 |\n");
    QVERIFY2(log, log ? "" : log.error().message.c_str());
    QCOMPARE(log->world_size, 16);
    const auto value = [&](const std::string &name) -> std::optional<std::string> {
      for (const auto &argument : log->arguments.arguments)
        if (argument.name == name) return argument.value;
      return std::nullopt;
    };
    QCOMPARE(value("--num-layers"), std::optional<std::string>("4"));
    QCOMPARE(value("--hidden-size"), std::optional<std::string>("1024"));
    // Megatron logs a schedule run's global_batch_size as micro-batch × DP: the schedule counts.
    {
      std::string scheduled = block;
      scheduled.insert(scheduled.find("  world_size"),
                       "  global_batch_size ............................... 8\n"
                       "  step_batch_size_schedule ........................ 0:64 1B:128\n");
      auto with_schedule = parseMegatronLog(scheduled);
      QVERIFY(with_schedule);
      bool has_global = false, has_schedule = false;
      for (const auto &argument : with_schedule->arguments.arguments) {
        has_global = has_global || argument.name == "--global-batch-size";
        has_schedule = has_schedule || argument.name == "--step-batch-size-schedule";
      }
      QVERIFY(!has_global && has_schedule);
    }
    QCOMPARE(value("--recompute-modules"), std::optional<std::string>("core_attn mlp"));
    QCOMPARE(value("--attention-backend"), std::optional<std::string>("flash"));
    QCOMPARE(value("--disable-bias-linear"), std::optional<std::string>(""));
    QCOMPARE(value("--swiglu"), std::optional<std::string>(""));
    QVERIFY(!value("--num-experts") && !value("--moe-router-topk"));
    QVERIFY(!value("--encoder-num-layers") && !value("--world-size"));
    MegatronTarget target;
    target.gpus = log->world_size;
    auto read = launchFromArguments(log->arguments, target);
    QVERIFY2(read, read ? "" : read.error().message.c_str());
    QVERIFY(!read->translation.row["model"]["linear_biases"].get<bool>());
    QVERIFY(read->translation.row["model"]["gated_mlp"].get<bool>());
    // One iteration line is no step.
    auto step = measuredStep(log->iterations);
    QVERIFY(!step);
    QVERIFY2(step.error().message.find("--step-time") != std::string::npos,
             step.error().message.c_str());
    // A block cut short, and none at all.
    auto cut = parseMegatronLog(block.substr(0, block.find("-------------------- end")));
    QVERIFY(!cut);
    QVERIFY2(cut.error().message.find("does not end") != std::string::npos,
             cut.error().message.c_str());
    QVERIFY(!parseMegatronLog("iteration 1/ 2 | elapsed time per iteration (ms): 3\n"));
  }

  // A launch's name is its file's, without the launch files' extensions.
  void launchesAreNamedAfterTheirFiles() {
    QCOMPARE(launchName("tests/gpt3_7b_tp4_pp1_memory_speed.model_config.yaml"),
             std::string("gpt3_7b_tp4_pp1_memory_speed"));
    QCOMPARE(launchName("/runs/train_llama.sh"), std::string("train_llama"));
    QCOMPARE(launchName("/runs/train_llama.log"), std::string("train_llama"));
    QCOMPARE(launchName("-"), std::string("-"));
    QCOMPARE(launchName("/runs/.sh"), std::string(".sh"));
  }

  // One message per bad launch, naming the argument.
  // Megatron's step batch-size schedule (num_microbatches_calculator.py): the step runs the
  // schedule's batch, not the micro-batch × DP Megatron writes into args.global_batch_size.
  void aStepBatchSizeScheduleSetsTheBatch() {
    // Thresholds in tokens (Megatron passes the sequence length): 2048-token sequences.
    const MegatronTranslation t = translated(
        std::string(kSmall) + "--micro-batch-size 2 --step-batch-size-schedule \"4.096M:96, "
                              "0:32 8192K:192\"",
        8);
    QCOMPARE(t.row["schedule"]["microbatches"].get<int>(), 2); // 32 / (2 × DP 8)
    const auto said = std::find_if(t.assumed.begin(), t.assumed.end(), [](const auto &line) {
      return line.find("global batch 32: the first of --step-batch-size-schedule") !=
             std::string::npos;
    });
    QVERIFY(said != t.assumed.end());
    // The later steps, sorted, from their first sample: 4.096M tokens / 2048 = 2000.
    QVERIFY2(said->find("96 from sample 2000, 192 from sample 4000") != std::string::npos,
             said->c_str());
    const std::pair<std::string, std::string> bad[] = {
        {"--global-batch-size 32 --step-batch-size-schedule 0:32", "both given"},
        {"--step-batch-size-schedule 0-32", "'0-32' is not THRESHOLD:BATCH"},
        {"--step-batch-size-schedule \"0:32 1B:x\"", "'1B:x' is not THRESHOLD:BATCH"},
        {"--step-batch-size-schedule 1M:32", "the first step must start at 0"},
        {"--step-batch-size-schedule \"0:32 0:64\"", "two steps start at 0 samples"},
        {"--step-batch-size-schedule 0:0", "a batch must be positive"},
        {"--micro-batch-size 2 --step-batch-size-schedule 0:33", "not a multiple"},
    };
    for (const auto &[arguments, named] : bad) {
      const std::string message = errorOf(std::string(kSmall) + arguments, 8);
      QVERIFY2(message.find("--step-batch-size-schedule") != std::string::npos ||
                   message.find("--global-batch-size") != std::string::npos,
               message.c_str());
      QVERIFY2(message.find(named) != std::string::npos,
               qPrintable(QString::fromStdString(arguments + " -> '" + message + "'")));
    }
  }

  void badLaunchesAreNamed() {
    const std::pair<std::string, std::string> cases[] = {
        {"--hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --vocab-size 10",
         "--num-layers"},
        {std::string(kSmall) + "--tensor-model-parallel-size $TP", "shell variable"},
        {std::string(kSmall) + "--global-batch-size 12 --micro-batch-size 1",
         "--global-batch-size"},
        {std::string(kSmall) + "--pipeline-model-parallel-size 2 "
                               "--num-layers-per-virtual-pipeline-stage 3",
         "--num-layers-per-virtual-pipeline-stage"},
        {std::string(kSmall) + "--num-experts 8 --moe-layer-freq [1,0,1,0]", "--moe-layer-freq"},
        {std::string(kSmall) + "--num-experts 8 --moe-ffn-hidden-size 512 "
                               "--moe-shared-expert-intermediate-size 700",
         "--moe-shared-expert-intermediate-size"},
        {std::string(kSmall) + "--tensor-model-parallel-size 3", "GPUs do not divide"},
        {"--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
         "--tokenizer-type HuggingFaceTokenizer",
         "--vocab N"},
        {std::string(kSmall) + "--num-layers x", "not a whole number"},
        {"--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
         "--vocab-size 10 --group-query-attention --num-query-groups 5",
         "--num-query-groups"},
        {"torchrun pretrain_gpt.py --num-layers '4", "quote"},
        {"torchrun /opt/megatron/pretrain_bert.py " + std::string(kSmall), "pretrain_bert.py"},
        {std::string(kSmall) + "--hybrid-override-pattern M-M-", "--hybrid-override-pattern"},
    };
    for (const auto &[text, named] : cases) {
      const std::string message = errorOf(text);
      QVERIFY2(message.find(named) != std::string::npos,
               qPrintable(QString::fromStdString(text + " -> '" + message + "'")));
    }
    // Without --gpus and without torchrun the world size is asked for.
    QVERIFY(errorOf(kSmall, 0).find("--gpus") != std::string::npos);
  }
};

QTEST_APPLESS_MAIN(TestMegatronArgs)
#include "test_megatron_args.moc"
