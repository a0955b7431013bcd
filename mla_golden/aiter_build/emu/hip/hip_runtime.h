// Host stand-in for <hip/hip_runtime.h>: the emulated device and the few runtime calls
// aiter's metadata planners make (device properties, host<->device copies, streams).
#pragma once

#include "emu_runtime.hpp"

// hip_runtime.h makes these visible to aiter's sources, which rely on it
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

typedef int hipError_t;
typedef int hipDevice_t;
typedef void* hipStream_t;
constexpr hipError_t hipSuccess = 0;

enum hipMemcpyKind
{
    hipMemcpyHostToHost,
    hipMemcpyHostToDevice,
    hipMemcpyDeviceToHost,
    hipMemcpyDeviceToDevice,
    hipMemcpyDefault
};

struct hipDeviceProp_t
{
    char name[256];
    char gcnArchName[256];
    int multiProcessorCount;
    int warpSize;
    size_t maxSharedMemoryPerMultiProcessor;
    size_t sharedMemPerBlock;
    int maxThreadsPerBlock;
};

namespace emu {
struct Device
{
    std::string arch = "gfx942";
    int cu_num       = 304;
    int warp_size    = 64;
    int lds_bytes    = 65536;
};
inline Device& device()
{
    static Device dev;
    return dev;
}
} // namespace emu

inline hipError_t hipGetDevice(hipDevice_t* dev)
{
    *dev = 0;
    return hipSuccess;
}
inline hipError_t hipGetDeviceCount(int* count)
{
    *count = 1;
    return hipSuccess;
}
inline hipError_t hipSetDevice(int) { return hipSuccess; }
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, hipDevice_t)
{
    std::memset(prop, 0, sizeof(*prop));
    const auto& d = emu::device();
    std::strncpy(prop->name, "emulated", sizeof(prop->name) - 1);
    std::strncpy(prop->gcnArchName, d.arch.c_str(), sizeof(prop->gcnArchName) - 1);
    prop->multiProcessorCount              = d.cu_num;
    prop->warpSize                         = d.warp_size;
    prop->maxSharedMemoryPerMultiProcessor = static_cast<size_t>(d.lds_bytes);
    prop->sharedMemPerBlock                = 65536;
    prop->maxThreadsPerBlock               = 1024;
    return hipSuccess;
}
inline hipError_t hipDeviceGetAttribute(int* value, int, int)
{
    *value = 0;
    return hipSuccess;
}
inline hipError_t hipMemcpy(void* dst, const void* src, size_t bytes, hipMemcpyKind)
{
    std::memmove(dst, src, bytes);
    return hipSuccess;
}
inline hipError_t hipMemcpyAsync(void* dst, const void* src, size_t bytes, hipMemcpyKind, hipStream_t)
{
    std::memmove(dst, src, bytes);
    return hipSuccess;
}
inline hipError_t hipMemset(void* dst, int value, size_t bytes)
{
    std::memset(dst, value, bytes);
    return hipSuccess;
}
inline hipError_t hipMemsetAsync(void* dst, int value, size_t bytes, hipStream_t)
{
    std::memset(dst, value, bytes);
    return hipSuccess;
}
inline hipError_t hipMalloc(void** ptr, size_t bytes)
{
    *ptr = std::malloc(bytes ? bytes : 1);
    return hipSuccess;
}
inline hipError_t hipMallocAsync(void** ptr, size_t bytes, hipStream_t) { return hipMalloc(ptr, bytes); }
inline hipError_t hipFree(void* ptr)
{
    std::free(ptr);
    return hipSuccess;
}
inline hipError_t hipFreeAsync(void* ptr, hipStream_t) { return hipFree(ptr); }
inline hipError_t hipStreamSynchronize(hipStream_t) { return hipSuccess; }
inline hipError_t hipDeviceSynchronize() { return hipSuccess; }
inline hipError_t hipGetLastError() { return hipSuccess; }
inline hipError_t hipPeekAtLastError() { return hipSuccess; }
inline const char* hipGetErrorString(hipError_t) { return "hipSuccess"; }
