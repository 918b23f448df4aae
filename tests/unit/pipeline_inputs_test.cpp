// Every `emo pipeline` input checked (issue 18): the stage profile's rows (src/pipeline/profile.cpp)
// and the job's numeric options (src/pipeline/job.cpp). A duplicate, empty, negative, NaN or
// out-of-range value is an Error naming the file and line or the flag, never a silent default.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "emo/pipeline/job.h"
#include "emo/pipeline/pipeline.h"
#include "test_util.h"

namespace emo::pipeline {
namespace {

const char* kHeader = "stage,instruction,frequency,time,energy\n";

// The error message of loading a profile with these rows (after the header), or "(ok)".
std::string load_message(const std::string& dir, const std::string& rows, std::string* path_out = nullptr) {
  std::string path = test::write(dir, "p.csv", kHeader + rows);
  if (path_out) *path_out = path;
  auto p = load_stage_profile(path);
  return p ? std::string("(ok)") : p.error().message();
}

TEST(PipelineInputs, DuplicateRowsNameTheFileAndBothLines) {
  std::string dir = test::temp_dir("pipeline_inputs_dup");
  std::string path;
  std::string msg = load_message(dir,
                                 "0,forward,1410,0.010,3.0\n"
                                 "0,backward,1410,0.020,6.0\n"
                                 "0,forward,1200,0.011,2.8\n"
                                 "0,forward,1410,0.012,3.1\n",
                                 &path);
  EXPECT_EQ(msg, path + ":line 5: stage 0 forward at 1410 MHz is also on line 2");
  // The same clock for another instruction or another stage is not a duplicate.
  EXPECT_EQ(load_message(dir,
                         "0,forward,1410,0.010,3.0\n0,backward,1410,0.020,6.0\n"
                         "1,forward,1410,0.010,3.0\n1,backward,1410,0.020,6.0\n"),
            "(ok)");
  // Blank lines do not shift the line numbers.
  EXPECT_EQ(load_message(dir, "1,backward,1200,0.02,5\n\n1,backward,1200,0.02,5\n", &path),
            path + ":line 4: stage 1 backward at 1200 MHz is also on line 2");
}

TEST(PipelineInputs, BadValuesNameTheFileAndLine) {
  std::string dir = test::temp_dir("pipeline_inputs_values");
  std::string path = dir + "/p.csv";
  const char* kBadClock = "column 'frequency': must be a whole number of MHz from 1 to 100000, got ";
  struct Case {
    std::string row;
    std::string message;  // after "PATH:line 2: "
  };
  const Case cases[] = {
      {"0,forward,1410,0,3.0", "column 'time': must be > 0, got 0"},
      {"0,forward,1410,-0.01,3.0", "column 'time': must be > 0, got -0.01"},
      {"0,forward,1410,nan,3.0", "column 'time': not a number: 'nan'"},
      {"0,forward,1410,inf,3.0", "column 'time': not a number: 'inf'"},
      {"0,forward,1410,0.01,0", "column 'energy': must be > 0, got 0"},
      {"0,forward,1410,0.01,-3", "column 'energy': must be > 0, got -3"},
      {"0,forward,1410,0.01,NaN", "column 'energy': not a number: 'NaN'"},
      {"0,forward,1410,0.01,", "column 'energy': empty"},
      {"1.5,forward,1410,0.01,3", "column 'stage': must be a whole number >= 0, got 1.5"},
      {"-1,forward,1410,0.01,3", "column 'stage': must be a whole number >= 0, got -1"},
      {"x,forward,1410,0.01,3", "column 'stage': not a number: 'x'"},
      {"0,sideways,1410,0.01,3", "column 'instruction': expected forward or backward, got 'sideways'"},
      {"0,forward,0,0.01,3", "column 'frequency': must be > 0, got 0"},
      {"0,forward,1410.5,0.01,3", std::string(kBadClock) + "1410.5"},
      {"0,forward,1e300,0.01,3", std::string(kBadClock) + "1e300"},
  };
  for (const Case& c : cases)
    EXPECT_EQ(load_message(dir, c.row + "\n"), path + ":line 2: " + c.message) << c.row;
}

TEST(PipelineInputs, EmptyAndHeaderOnlyFilesAreErrors) {
  std::string dir = test::temp_dir("pipeline_inputs_empty");
  std::string empty = test::write(dir, "empty.csv", "");
  auto p = load_stage_profile(empty);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message(), empty + ": empty file (no header line)");
  std::string header_only = test::write(dir, "header.csv", kHeader);
  p = load_stage_profile(header_only);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message(), header_only + ": no data rows (only the header line)");
  std::string blank_rows = test::write(dir, "blank.csv", std::string(kHeader) + "\n\n");
  p = load_stage_profile(blank_rows);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().where, blank_rows);
}

JobOptions small_job(const std::string& dir) {
  JobOptions o;
  o.profile = test::write(dir, "prof.csv",
                          std::string(kHeader) +
                              "0,forward,1410,0.010,3.0\n0,forward,1200,0.011,2.8\n"
                              "0,backward,1410,0.020,6.0\n0,backward,1200,0.022,5.6\n");
  o.microbatches = 4;
  o.blocking_power_w = 80;
  return o;
}

// The flag a job's error names, or "(ok)".
std::string where(const JobOptions& o) {
  auto r = run_job(o);
  return r ? std::string("(ok)") : r.error().where;
}

TEST(PipelineInputs, UnitTimeGivenIsUsedOrRefusedNeverTheDefault) {
  std::string dir = test::temp_dir("pipeline_inputs_unit");
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  JobOptions o = small_job(dir);
  auto r = run_job(o);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_DOUBLE_EQ(r->unit_s, 0.001);  // absent: the default
  o.unit_time_s = 0.002;
  r = run_job(o);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_DOUBLE_EQ(r->unit_s, 0.002);
  for (double bad : {0.0, -0.0, -0.001, nan, inf, -inf, 3601.0}) {
    o.unit_time_s = bad;
    r = run_job(o);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().where, "--unit-time") << bad;
  }
  const std::string msg = "--unit-time: must be more than 0 and at most 3600 seconds, got ";
  o.unit_time_s = 0;
  EXPECT_EQ(run_job(o).error().message(), msg + "0");
  o.unit_time_s = nan;
  EXPECT_EQ(run_job(o).error().message(), msg + "nan");
}

TEST(PipelineInputs, EveryNumericOptionRefusesNaNAndOutOfRange) {
  std::string dir = test::temp_dir("pipeline_inputs_numbers");
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const JobOptions base = small_job(dir);
  EXPECT_EQ(where(base), "(ok)");
  for (double bad : {-1.0, nan, inf, 1e300}) {
    JobOptions o = base;
    o.blocking_power_w = bad;
    EXPECT_EQ(where(o), "--blocking-power") << bad;
  }
  for (double bad : {-1e-9, nan, inf}) {
    JobOptions o = base;
    o.tolerance = bad;
    EXPECT_EQ(where(o), "--tolerance") << bad;
  }
  for (double bad : {0.0, -1.0, nan, inf}) {
    JobOptions o = base;
    o.plan_at_s = bad;
    EXPECT_EQ(where(o), "--plan-at") << bad;
  }
  for (double bad : {-0.01, nan, inf, 100.5}) {
    JobOptions o = base;
    o.max_slowdown = bad;
    EXPECT_EQ(where(o), "--max-slowdown") << bad;
  }
  for (int bad : {0, -1, -4096}) {
    JobOptions o = base;
    o.microbatches = bad;
    EXPECT_EQ(where(o), "--microbatches") << bad;
  }
  for (int bad : {0, -1}) {
    JobOptions o = base;
    o.stages = bad;
    EXPECT_EQ(where(o), "--stages") << bad;  // 0 used to mean "every stage"
  }
  JobOptions o = base;
  o.stages = 1;
  EXPECT_EQ(where(o), "(ok)");
  o.stages = 2;
  EXPECT_EQ(where(o), o.profile);  // more stages than the profile has
  o = base;
  o.max_slowdown = nan;
  EXPECT_EQ(run_job(o).error().message(),
            "--max-slowdown: must be from 0 to 100 (a fraction of the fastest plan's time), got nan");
  o = base;
  o.stages = 0;
  EXPECT_EQ(run_job(o).error().message(), "--stages: must be >= 1, got 0");
}

}  // namespace
}  // namespace emo::pipeline
