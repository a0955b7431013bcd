// Host stand-in for aiter_stream.h: one (null) stream.
#pragma once

#include "hip/hip_runtime.h"

namespace aiter {
inline hipStream_t getCurrentHIPStream() { return nullptr; }
inline void setCurrentHIPStream(hipStream_t) {}
} // namespace aiter
