// PLACEHOLDER: to be replaced by the real ops.
#include "weft/autodiff/ops.h"
