#include "baton/status.h"

#include <gtest/gtest.h>

#include <sstream>

#include "baton/identity.h"

namespace baton {
namespace {

TEST(Status, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(s.message().empty());
  EXPECT_TRUE(s.where().empty());
}

TEST(Status, FailureCarriesCodeComponentAndMessage) {
  Status s = Status::InvalidArgument("spank", "port_range '9-1' is empty");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.component(), "spank");
  EXPECT_EQ(s.message(), "port_range '9-1' is empty");
  const std::string text = s.ToString();
  EXPECT_EQ(text.rfind("baton[spank] InvalidArgument (", 0), 0u) << text;
  EXPECT_NE(text.find("): port_range '9-1' is empty"), std::string::npos) << text;
}

TEST(Status, RecordsWhereItWasMade) {
  Status s = Status::IOError("ckpt", "disk full");
  // At least the host is always known.
  EXPECT_NE(s.where().find(CurrentIdentity().host), std::string::npos) << s.where();
  EXPECT_NE(s.ToString().find(s.where()), std::string::npos);
}

TEST(Status, EveryConstructorGivesItsCode) {
  EXPECT_EQ(Status::NotFound("c", "m").code(), Code::kNotFound);
  EXPECT_EQ(Status::Corruption("c", "m").code(), Code::kCorruption);
  EXPECT_EQ(Status::IOError("c", "m").code(), Code::kIOError);
  EXPECT_EQ(Status::Timeout("c", "m").code(), Code::kTimeout);
  EXPECT_EQ(Status::Unavailable("c", "m").code(), Code::kUnavailable);
  EXPECT_EQ(Status::Aborted("c", "m").code(), Code::kAborted);
  EXPECT_EQ(Status::Internal("c", "m").code(), Code::kInternal);
  EXPECT_EQ(CodeName(Code::kTimeout), "Timeout");
}

TEST(Status, AnnotateKeepsCodeAndOrigin) {
  Status s = Status::Corruption("ckpt", "checksum mismatch in shard-0.h5");
  Status a = s.Annotate("restoring step 40");
  EXPECT_EQ(a.code(), Code::kCorruption);
  EXPECT_EQ(a.component(), "ckpt");
  EXPECT_EQ(a.where(), s.where());
  EXPECT_EQ(a.message(), "restoring step 40: checksum mismatch in shard-0.h5");
  EXPECT_EQ(s.message(), "checksum mismatch in shard-0.h5") << "the original is unchanged";
  EXPECT_TRUE(Status::OK().Annotate("x").ok());
}

Status FailsThenReturns(bool fail, int* reached) {
  BATON_RETURN_IF_ERROR(fail ? Status::Timeout("runtime", "allreduce") : Status::OK());
  *reached = 1;
  return Status::OK();
}

TEST(Status, ReturnIfErrorReturnsEarlyOnlyOnFailure) {
  int reached = 0;
  EXPECT_EQ(FailsThenReturns(true, &reached).code(), Code::kTimeout);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(FailsThenReturns(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

}  // namespace
}  // namespace baton
