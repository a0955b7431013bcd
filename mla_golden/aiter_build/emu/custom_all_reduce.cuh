// Host stand-in for the warp reduction aiter's custom_all_reduce.cuh provides to the planners:
// the same butterfly (xor shuffles, halving strides) over emulated lanes.
#pragma once

#include "aiter_hip_common.h"

namespace aiter {
template <typename T>
struct AddFunctor
{
    T operator()(const T& a, const T& b) const { return a + b; }
};
template <typename T>
struct MaxFunctor
{
    T operator()(const T& a, const T& b) const { return a > b ? a : b; }
};
template <typename T>
struct MinFunctor
{
    T operator()(const T& a, const T& b) const { return a < b ? a : b; }
};

template <template <typename> class functor, typename T, int reduce_range, int stop_stride = 0>
T warpReduce(T val)
{
    auto op = functor<T>();
    for(int stride = reduce_range / 2; stride > stop_stride; stride >>= 1)
    {
        T tmp = emu::shfl_xor(val, stride, reduce_range);
        val   = op(val, tmp);
    }
    return val;
}
} // namespace aiter
