// SIMT emulation of one HIP workgroup on the host, for aiter's metadata planners.
//
// Every thread of the launched workgroup runs as a fiber on one OS thread: a
// ucontext starts it on its own stack, _setjmp/_longjmp switch between it and
// the scheduler afterwards (swapcontext would make a signal-mask system call
// at every switch, and switches dominate the planner's run time). Fibers switch only at collective points (warp shuffles/reductions,
// __syncthreads), which is where the planners exchange data between lanes; in
// between a lane runs alone. The planners compiled here keep lane-private or
// uniform state between those points, so the result equals lockstep execution.
// A collective that not every live lane of a warp reaches is reported as an
// emulation error instead of hanging.
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <csetjmp>
#include <ucontext.h>
#include <vector>

struct dim3
{
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace emu {

constexpr int kWarpSize = 64; // both emulated targets (gfx942, gfx950) are wave64

struct EmulationError : std::runtime_error
{
    using std::runtime_error::runtime_error;
};

struct Fiber
{
    ucontext_t ctx; // its start only
    jmp_buf resume; // where it yielded
    unsigned tid  = 0;
    bool started  = false;
    bool done     = false;
};

struct Barrier
{
    int arrived       = 0;
    int live          = 0;
    unsigned long gen = 0;
};

struct Block
{
    dim3 block_dim;
    std::vector<Fiber> fibers;
    ucontext_t scheduler;
    jmp_buf scheduler_resume;
    int current = -1;
    std::function<void()> body;
    Barrier block_barrier;
    std::vector<Barrier> warp_barriers;
    std::vector<uint64_t> slots; // one exchange slot per thread
    unsigned long progress = 0;
};

// Fiber stacks, kept from launch to launch (allocating them anew costs page faults every run).
constexpr size_t kStackBytes = 256 * 1024;
inline char* fiber_stack(unsigned t)
{
    static std::vector<std::unique_ptr<char[]>> stacks; // left uninitialised: pages are touched as used
    while(stacks.size() <= t)
        stacks.emplace_back(new char[kStackBytes]);
    return stacks[t].get();
}

inline Block*& current_block()
{
    static Block* block = nullptr;
    return block;
}

// Workgroup local memory: one buffer, filled by the harness with a canary before each launch.
inline std::vector<uint8_t>& lds_storage()
{
    static std::vector<uint8_t> storage;
    return storage;
}
inline uint32_t& lds_canary()
{
    static uint32_t canary = 0;
    return canary;
}
inline void* lds() { return lds_storage().data(); }

struct ThreadIdx
{
    unsigned x, y, z;
};

inline unsigned thread_id()
{
    Block* b = current_block();
    return b ? b->fibers[b->current].tid : 0;
}
inline ThreadIdx thread_idx() { return ThreadIdx{thread_id(), 0, 0}; }
inline dim3 block_dim()
{
    Block* b = current_block();
    return b ? b->block_dim : dim3(1, 1, 1);
}

inline void yield()
{
    Block* b = current_block();
    if(!_setjmp(b->fibers[b->current].resume))
        _longjmp(b->scheduler_resume, 1);
}

// Wait until every live member of the barrier has arrived.
inline void arrive_and_wait(Barrier& bar)
{
    Block* b                 = current_block();
    const unsigned long mine = bar.gen;
    ++b->progress;
    if(++bar.arrived >= bar.live)
    {
        bar.arrived = 0;
        ++bar.gen;
        return;
    }
    while(bar.gen == mine)
        yield();
}

inline void syncthreads() { arrive_and_wait(current_block()->block_barrier); }

inline int lane_id() { return static_cast<int>(thread_id() % kWarpSize); }

// All lanes of the warp publish a value; each then reads the one of lane `src` (wrapping).
template <typename T>
T exchange(T value, int src)
{
    static_assert(sizeof(T) <= 8, "exchange of a type wider than 8 bytes");
    Block* b            = current_block();
    const unsigned tid  = thread_id();
    const unsigned warp = tid / kWarpSize;
    Barrier& bar        = b->warp_barriers[warp];
    uint64_t bits       = 0;
    std::memcpy(&bits, &value, sizeof(T));
    b->slots[tid] = bits;
    arrive_and_wait(bar);
    const unsigned src_tid = warp * kWarpSize + ((static_cast<unsigned>(src)) % kWarpSize);
    T result;
    uint64_t src_bits = b->slots[src_tid];
    std::memcpy(&result, &src_bits, sizeof(T));
    arrive_and_wait(bar); // nobody overwrites a slot before every lane has read
    return result;
}

// hip __shfl(var, src_lane, width): lane index taken modulo width within the lane's segment
template <typename T>
T shfl(T value, int src_lane, int width = kWarpSize)
{
    const int self = lane_id();
    const int base = self & ~(width - 1);
    return exchange(value, base + (((src_lane % width) + width) % width));
}
template <typename T>
T shfl_up(T value, unsigned delta, int width = kWarpSize)
{
    const int self = lane_id();
    const int pos  = self % width;
    const int src  = (pos >= static_cast<int>(delta)) ? self - static_cast<int>(delta) : self;
    return exchange(value, src);
}
template <typename T>
T shfl_down(T value, unsigned delta, int width = kWarpSize)
{
    const int self = lane_id();
    const int pos  = self % width;
    const int src  = (pos + static_cast<int>(delta) < width) ? self + static_cast<int>(delta) : self;
    return exchange(value, src);
}
template <typename T>
T shfl_xor(T value, int mask, int width = kWarpSize)
{
    const int self = lane_id();
    const int base = self & ~(width - 1);
    return exchange(value, base + (((self % width) ^ mask) % width));
}
inline uint64_t ballot(int pred)
{
    uint64_t mask = 0;
    for(int l = 0; l < kWarpSize; ++l)
    {
        if(exchange<int>(pred ? 1 : 0, l))
            mask |= (uint64_t(1) << l);
    }
    return mask;
}

inline void fiber_entry()
{
    Block* b = current_block();
    b->body();
    Fiber& f = b->fibers[b->current];
    f.done   = true;
    // This thread leaves: barriers stop waiting for it.
    const unsigned warp = f.tid / kWarpSize;
    for(Barrier* bar : {&b->block_barrier, &b->warp_barriers[warp]})
    {
        --bar->live;
        if(bar->arrived > 0 && bar->arrived >= bar->live)
        {
            bar->arrived = 0;
            ++bar->gen;
        }
    }
    ++b->progress;
    _longjmp(b->scheduler_resume, 1);
}

// Run `body` once per thread of a workgroup of `block` threads (grid must be 1 x 1 x 1).
inline void launch(dim3 grid, dim3 block, size_t lds_bytes, std::function<void()> body)
{
    if(grid.x * grid.y * grid.z != 1)
        throw EmulationError("emulation supports a single workgroup per launch");
    if(lds_bytes > lds_storage().size())
        throw EmulationError("launch asks for more LDS than the emulated device has");
    const unsigned n = block.x * block.y * block.z;
    Block b;
    b.block_dim = block;
    b.body      = std::move(body);
    b.fibers.resize(n);
    b.slots.assign(n, 0);
    b.block_barrier.live = static_cast<int>(n);
    const unsigned warps = (n + kWarpSize - 1) / kWarpSize;
    b.warp_barriers.resize(warps);
    for(unsigned w = 0; w < warps; ++w)
        b.warp_barriers[w].live = static_cast<int>(std::min<unsigned>(kWarpSize, n - w * kWarpSize));
    Block* saved    = current_block();
    current_block() = &b;
    for(unsigned t = 0; t < n; ++t)
    {
        Fiber& f = b.fibers[t];
        f.tid    = t;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp   = fiber_stack(t);
        f.ctx.uc_stack.ss_size = kStackBytes;
        f.ctx.uc_link          = nullptr;
        makecontext(&f.ctx, fiber_entry, 0);
    }
    unsigned remaining = n;
    while(remaining > 0)
    {
        const unsigned long before = b.progress;
        remaining                  = 0;
        for(unsigned t = 0; t < n; ++t)
        {
            if(b.fibers[t].done)
                continue;
            b.current = static_cast<int>(t);
            Fiber& f  = b.fibers[t];
            if(!_setjmp(b.scheduler_resume))
            {
                if(f.started)
                    _longjmp(f.resume, 1);
                f.started = true;
                swapcontext(&b.scheduler, &f.ctx);
            }
            if(!b.fibers[t].done)
                ++remaining;
        }
        if(remaining > 0 && b.progress == before)
        {
            current_block() = saved;
            throw EmulationError("deadlock: a collective operation that not every live lane reaches");
        }
    }
    current_block() = saved;
}

} // namespace emu

// ---- HIP device-side spellings -------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define threadIdx (::emu::thread_idx())
#define blockDim (::emu::block_dim())
#define blockIdx (::dim3(0, 0, 0))
#define gridDim (::dim3(1, 1, 1))
#define __syncthreads() ::emu::syncthreads()

template <typename T>
inline T __shfl(T var, int src_lane, int width = emu::kWarpSize)
{
    return emu::shfl(var, src_lane, width);
}
template <typename T>
inline T __shfl_xor(T var, int mask, int width = emu::kWarpSize)
{
    return emu::shfl_xor(var, mask, width);
}
template <typename T>
inline T __shfl_up(T var, unsigned delta, int width = emu::kWarpSize)
{
    return emu::shfl_up(var, delta, width);
}
template <typename T>
inline T __shfl_down(T var, unsigned delta, int width = emu::kWarpSize)
{
    return emu::shfl_down(var, delta, width);
}
inline uint64_t __ballot(int pred) { return emu::ballot(pred); }
inline int __lane_id() { return emu::lane_id(); }

// Single-workgroup emulation: atomics need no synchronisation.
template <typename T, typename U>
inline T atomicAdd(T* addr, U val)
{
    T old = *addr;
    *addr = static_cast<T>(old + val);
    return old;
}
template <typename T, typename U>
inline T atomicMax(T* addr, U val)
{
    T old = *addr;
    if(static_cast<T>(val) > old)
        *addr = static_cast<T>(val);
    return old;
}
template <typename T, typename U>
inline T atomicMin(T* addr, U val)
{
    T old = *addr;
    if(static_cast<T>(val) < old)
        *addr = static_cast<T>(val);
    return old;
}
template <typename T, typename U>
inline T atomicExch(T* addr, U val)
{
    T old = *addr;
    *addr = static_cast<T>(val);
    return old;
}
template <typename T, typename U, typename V>
inline T atomicCAS(T* addr, U compare, V val)
{
    T old = *addr;
    if(old == static_cast<T>(compare))
        *addr = static_cast<T>(val);
    return old;
}

// HIP's global min/max overloads for device code.
template <typename A, typename B>
inline constexpr std::common_type_t<A, B> min(A a, B b)
{
    using C = std::common_type_t<A, B>;
    return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
template <typename A, typename B>
inline constexpr std::common_type_t<A, B> max(A a, B b)
{
    using C = std::common_type_t<A, B>;
    return static_cast<C>(a) > static_cast<C>(b) ? static_cast<C>(a) : static_cast<C>(b);
}
