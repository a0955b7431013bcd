// Host stand-in for the ck_tile helpers aiter's (pre-OPUS) metadata planners use.
#pragma once

#include "hip/hip_runtime.h"

#define CK_TILE_DEVICE inline
#define CK_TILE_HOST inline
#define CK_TILE_HOST_DEVICE inline

namespace ck_tile {
__host__ __device__ constexpr int get_warp_size() { return emu::kWarpSize; }
inline int get_lane_id() { return emu::lane_id(); }
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
constexpr T min(T a)
{
    return a;
}
template <typename T>
constexpr T max(T a)
{
    return a;
}
template <typename X, typename Y>
constexpr auto integer_divide_ceil(X x, Y y)
{
    return (x + y - 1) / y;
}
template <typename X, typename Y>
constexpr auto integer_least_multiple(X x, Y y)
{
    return y * integer_divide_ceil(x, y);
}
template <typename T>
constexpr T next_power_of_two(T x)
{
    if(x <= 1)
        return 1;
    T p = 1;
    while(p < x)
        p <<= 1;
    return p;
}
template <typename T>
T warp_shuffle_up(const T& v, unsigned delta)
{
    // ds_bpermute from lane (lane - delta) mod warp size
    return emu::shfl(v, emu::lane_id() - static_cast<int>(delta));
}
template <typename T>
T warp_shuffle_down(const T& v, unsigned delta)
{
    return emu::shfl(v, emu::lane_id() + static_cast<int>(delta));
}
template <typename T>
T warp_shuffle(const T& v, unsigned src_lane)
{
    return emu::shfl(v, static_cast<int>(src_lane));
}
} // namespace ck_tile
