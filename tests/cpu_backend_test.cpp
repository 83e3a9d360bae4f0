// PLACEHOLDER: to be replaced by the real tests.
#include "op_test_util.h"
