// Host stand-in for aiter's aiter_hip_common.h: checks throw (see check_failure.hpp), the GPU
// architecture is the emulated device's.
#pragma once

#include "check_failure.hpp"
#include "ck_tile/core.hpp"
#include "hip/hip_runtime.h"
#include "opus/opus.hpp"
#if __has_include("aiter_enum.h")
#include "aiter_enum.h"
#endif

#include <cstdint>
#include <iostream>
#include <string>

#define AITER_CHECK(x, ...)                                                                    \
    do                                                                                         \
    {                                                                                          \
        if(!(x))                                                                               \
            ::emu::check_fail("AITER_CHECK", __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__);    \
    } while(0)
#define CHECK_COND(x, ...) AITER_CHECK(x __VA_OPT__(, ) __VA_ARGS__)
#define HIP_CALL(call)                                                                          \
    do                                                                                          \
    {                                                                                           \
        hipError_t err_ = (call);                                                               \
        if(err_ != hipSuccess)                                                                  \
            ::emu::check_fail("HIP_CALL", __FILE__, __LINE__, "HIP error ", err_);              \
    } while(0)
#define HIP_CALL_LAUNCH(call) HIP_CALL(call)
#define AITER_LOG_INFO(x)
#define AITER_LOG_WARNING(x)
#define AITER_LOG_ERROR(x)

struct HipDeviceGuard
{
    explicit HipDeviceGuard(int) {}
};

static inline const std::string get_gpu_arch() { return emu::device().arch; }
