// A Megatron-LM launch read as a pipescope configuration (engine/model/megatron_args.h): the CI
// tests' model_config.yaml files read into exactly the configurations of their validation rows
// (two independent mappings of the same launch agreeing), a shell script read as its YAML twin,
// Megatron-LM's defaults where the arguments are silent, and one named error per bad launch.
#include <QtTest>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/model/megatron_args.h"
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
        QVERIFY(names(unpriced, "--no-gradient-accumulation-fusion"));
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
    QVERIFY(!llama.row["training"]["fp32_gradients"].get<bool>()); // --grad-reduce-in-bf16
    QCOMPARE(llama.row["training"]["cross_entropy"].get<std::string>(),
             std::string("vocab-parallel"));

    // 8 GPUs from torchrun cannot hold TP 8 × PP 16; on 128 it reads.
    const std::string gpt3 = example("train_gpt3_175b_distributed.sh");
    QVERIFY(errorOf(gpt3, 0).find("TP 8 × PP 16") != std::string::npos);
    const MegatronTranslation big = translated(gpt3, 128);
    QCOMPARE(big.row["model"]["layers"].get<int>(), 96);
    QCOMPARE(big.row["model"]["dtype"].get<std::string>(), std::string("fp16"));
    QCOMPARE(big.row["schedule"]["microbatches"].get<int>(), 1536);
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
  }

  // A launch's name is its file's, without the launch files' extensions.
  void launchesAreNamedAfterTheirFiles() {
    QCOMPARE(launchName("tests/gpt3_7b_tp4_pp1_memory_speed.model_config.yaml"),
             std::string("gpt3_7b_tp4_pp1_memory_speed"));
    QCOMPARE(launchName("/runs/train_llama.sh"), std::string("train_llama"));
    QCOMPARE(launchName("-"), std::string("-"));
    QCOMPARE(launchName("/runs/.sh"), std::string(".sh"));
  }

  // One message per bad launch, naming the argument.
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
