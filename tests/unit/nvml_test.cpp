// The NVML backend without a GPU: opening fails with an error naming libnvidia-ml.so.1, product
// names map to the right built-in profiles, and the microbenchmark child-process protocol (start
// line, result line, energy read at both, stderr on failure, timeout) works with stand-in scripts.
#include "emo/device/nvml.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "test_util.h"

namespace emo::device {
namespace {

TEST(Nvml, OpenWithoutTheLibraryNamesIt) {
  if (void* h = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(h);
    GTEST_SKIP() << "libnvidia-ml.so.1 is installed here: this test covers machines without it";
  }
  auto dev = open_nvml_device(0);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.error().where, "nvml:0");
  EXPECT_NE(dev.error().what.find("libnvidia-ml.so.1"), std::string::npos) << dev.error().message();
  EXPECT_FALSE(dev.error().note.empty());
  auto bad = open_nvml_device(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().where, "nvml:-1");
}

TEST(Nvml, ProductNamesMatchTheBuiltinProfiles) {
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA H100 80GB HBM3", "h100"},
      {"NVIDIA H200", "h200"},
      {"NVIDIA GH200 480GB", "h200"},
      {"NVIDIA A100-SXM4-80GB", "a100"},
      {"Tesla V100-SXM2-16GB", "v100"},
      {"Tesla V100-PCIE-32GB", "v100-pcie"},
      {"NVIDIA A40", "a40"},
  };
  for (auto [name, want] : cases) {
    auto m = match_profile(name);
    ASSERT_TRUE(m.ok()) << name << ": " << m.error().message();
    EXPECT_EQ(m->profile.name, want) << name;
    EXPECT_TRUE(m->note.empty()) << name << ": " << m->note;
  }
  // A PCIe board of an SXM profile matches, with a note that its power figures differ.
  auto pcie = match_profile("NVIDIA A100 80GB PCIe");
  ASSERT_TRUE(pcie.ok());
  EXPECT_EQ(pcie->profile.name, "a100");
  EXPECT_NE(pcie->note.find("PCIe"), std::string::npos);
}

TEST(Nvml, UnknownModelsUseTheirFamilyOrFail) {
  // No digit may run on: an RTX A4000 is no A40.
  auto a4000 = match_profile("NVIDIA RTX A4000");
  ASSERT_TRUE(a4000.ok());
  EXPECT_FALSE(a4000->note.empty());
  auto h800 = match_profile("NVIDIA H800");
  ASSERT_TRUE(h800.ok());
  EXPECT_EQ(h800->profile.name.front(), 'h');
  EXPECT_NE(h800->note.find("no built-in profile"), std::string::npos);
  auto a30 = match_profile("NVIDIA A30");
  ASSERT_TRUE(a30.ok());
  EXPECT_EQ(a30->profile.name, "a40");  // nearest model number in the family
  for (const char* name : {"Tesla T4", "NVIDIA GeForce RTX 4090", "NVIDIA L40S"}) {
    auto m = match_profile(name);
    ASSERT_FALSE(m.ok()) << name << " matched " << m->profile.name;
    EXPECT_NE(m.error().note.find("h100"), std::string::npos);
  }
}

TEST(Nvml, MicrobenchLinesParse) {
  auto start = parse_microbench_line(R"({"phase":"start"})");
  ASSERT_TRUE(start.ok());
  EXPECT_EQ(start->kind, "start");
  auto r = parse_microbench_line(R"({"kind":"stream_copy","seconds":2.5,"iterations":812})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->kind, "stream_copy");
  EXPECT_DOUBLE_EQ(r->seconds, 2.5);
  EXPECT_EQ(r->iterations, 812);
  for (const char* bad :
       {"not json", R"({"kind":"fma_loop","seconds":0,"iterations":3})",
        R"({"kind":"fma_loop","seconds":1.0})", R"({"seconds":1.0,"iterations":3})",
        R"({"kind":"fma_loop","seconds":1.0,"iterations":-1})", R"({"phase":"stop"})", "[1]"}) {
    auto p = parse_microbench_line(bad);
    EXPECT_FALSE(p.ok()) << bad;
  }
}

TEST(Nvml, MicrobenchArgumentsNameTheBenchmarkAndTheGpu) {
  auto by_index = microbench_args({BenchKind::kIntensity, 8, 2.0}, 3, "");
  EXPECT_EQ(by_index, (std::vector<std::string>{"intensity", "--flops-per-byte", "8", "--min-seconds", "2",
                                                "--device", "3"}));
  auto by_uuid = microbench_args({BenchKind::kTensorGemm, 0, 1.5}, 0, "GPU-1234");
  EXPECT_EQ(by_uuid, (std::vector<std::string>{"tensor_gemm", "--min-seconds", "1.5", "--uuid", "GPU-1234"}));
}

// A stand-in for emo-microbench: a shell script in a temp dir.
std::string script(const std::string& name, const std::string& body) {
  std::string path = test::temp_dir("nvml_" + name.substr(0, name.find('.'))) + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(Nvml, RunMicrobenchMeasuresEnergyBetweenStartAndResult) {
  std::string env_out = test::temp_dir("nvml_env") + "/env.txt";
  std::string exe = script("ok.sh", "echo \"$CUDA_DEVICE_ORDER $1 $2\" > " + env_out +
                                        "\n"
                                        "echo 'setting up' >&2\n"
                                        "echo '{\"phase\":\"start\"}'\n"
                                        "sleep 0.4\n"
                                        "echo '{\"kind\":\"fma_loop\",\"seconds\":0.4,\"iterations\":42}'\n");
  double counter = 100;
  int reads = 0, samples = 0;
  auto energy = [&]() -> Result<double> {
    ++reads;
    counter += 30;  // the counter advances 30 J between the reads
    return counter;
  };
  auto run = run_microbench(
      {exe, "fma_loop", "--min-seconds"}, energy, [&] { ++samples; }, 30);
  ASSERT_TRUE(run.ok()) << run.error().message();
  EXPECT_EQ(reads, 2);
  EXPECT_DOUBLE_EQ(run->energy_j, 30);
  EXPECT_DOUBLE_EQ(run->seconds, 0.4);
  EXPECT_EQ(run->iterations, 42);
  EXPECT_GE(samples, 1);
  std::ifstream in(env_out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "PCI_BUS_ID fma_loop --min-seconds");  // NVML's numbering, and the arguments
}

TEST(Nvml, RunMicrobenchReportsTheChildsError) {
  auto energy = []() -> Result<double> { return 0.0; };
  std::string failing =
      script("fail.sh", "echo 'emo-microbench: error: no CUDA device 3 (1 visible)' >&2\nexit 1\n");
  auto r = run_microbench({failing}, energy, nullptr, 30);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("status 1"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().what.find("no CUDA device 3"), std::string::npos) << r.error().message();

  std::string no_start = script("nostart.sh", "echo '{\"kind\":\"idle\",\"seconds\":1,\"iterations\":0}'\n");
  auto ns = run_microbench({no_start}, energy, nullptr, 30);
  ASSERT_FALSE(ns.ok());
  EXPECT_NE(ns.error().what.find("before the start line"), std::string::npos) << ns.error().message();

  std::string garbage = script("garbage.sh", "echo '{\"phase\":\"start\"}'\necho 'Segmentation fault'\n");
  auto g = run_microbench({garbage}, energy, nullptr, 30);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().what.find("Segmentation fault"), std::string::npos) << g.error().message();

  auto missing = run_microbench({"/nonexistent/emo-microbench"}, energy, nullptr, 30);
  ASSERT_FALSE(missing.ok());
}

TEST(Nvml, RunMicrobenchKillsAHungChild) {
  std::string hung = script("hung.sh", "echo '{\"phase\":\"start\"}'\nexec sleep 30\n");
  auto energy = []() -> Result<double> { return 1.0; };
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_microbench({hung}, energy, nullptr, 0.5);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what.find("no result after"), std::string::npos) << r.error().message();
  EXPECT_LT(took, 10);
}

}  // namespace
}  // namespace emo::device
