// Host stand-in for the opus helpers aiter's metadata planners use.
#pragma once

#include "hip/hip_runtime.h"

namespace opus {
__host__ __device__ constexpr int get_warp_size() { return emu::kWarpSize; }
inline int lane_id() { return emu::lane_id(); }
template <typename A, typename B>
constexpr std::common_type_t<A, B> min(A a, B b)
{
    return ::min(a, b);
}
template <typename A, typename B>
constexpr std::common_type_t<A, B> max(A a, B b)
{
    return ::max(a, b);
}
template <typename T>
T shfl(T value, int src_lane, int width = emu::kWarpSize)
{
    return emu::shfl(value, src_lane, width);
}
} // namespace opus
