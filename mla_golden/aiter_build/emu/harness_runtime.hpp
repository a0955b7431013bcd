// The harness around the planner calls: reads case after case from stdin, runs each five times
// with different canaries (in the output buffers and a tail after them, in a tail after every
// input, in LDS) and prints what the runs found (see report()) or the failed check.
//
// Case format (whitespace separated): DEVICE arch cu_num warp_size lds_bytes / ENV n {name value|-}
// / OP name / PARAM index kind ... / END.  Kinds: int v; optint -|v; optst -|ScalarTypeName;
// tensor name i32|u64 in|out ndim dims... [count values...] (values only for inputs).
#pragma once

#include "emu_runtime.hpp"
#include "hip/hip_runtime.h"
#include "check_failure.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace emu_h {

// Varied tail after each input: head folding makes the planner index seqlens_qo_indptr and
// kv_last_page_lens by folded batch (up to batches x 8), far past a short tail; a read past a
// 64-element tail hit unvaried heap memory and showed a dependent value as defined.
constexpr int kInputTail  = 65536;
constexpr int kOutputTail = 65536;

struct Buffer
{
    std::string name, dtype;
    bool is_input = false;
    std::vector<int64_t> shape;
    std::vector<int64_t> values; // inputs only
    std::vector<uint8_t> storage;
    int64_t numel() const
    {
        int64_t n = 1;
        for(auto s : shape)
            n *= s;
        return n;
    }
    size_t elem() const { return dtype == "u64" ? 8 : 4; }
};

struct Case
{
    std::string op;
    std::vector<std::pair<std::string, std::string>> env; // "-" = unset
    std::map<int, int64_t> ints;
    std::map<int, std::string> opts; // "-" = none
    std::map<int, Buffer> buffers;
    std::map<int, std::shared_ptr<void>> tensors;
};

void dispatch(Case& c);

// Reads one case; false at the end of the input.
inline bool read_case(std::istream& in, Case& c)
{
    std::string tok;
    bool any = false;
    auto& dev = emu::device();
    while(in >> tok && tok != "END")
    {
        any = true;
        if(tok == "DEVICE")
            in >> dev.arch >> dev.cu_num >> dev.warp_size >> dev.lds_bytes;
        else if(tok == "ENV")
        {
            int n;
            in >> n;
            for(int i = 0; i < n; ++i)
            {
                std::string k, v;
                in >> k >> v;
                c.env.emplace_back(k, v);
            }
        }
        else if(tok == "OP")
            in >> c.op;
        else if(tok == "PARAM")
        {
            int idx;
            std::string kind;
            in >> idx >> kind;
            if(kind == "int")
                in >> c.ints[idx];
            else if(kind == "optint" || kind == "optst")
                in >> c.opts[idx];
            else if(kind == "tensor")
            {
                Buffer b;
                std::string io;
                int ndim;
                in >> b.name >> b.dtype >> io >> ndim;
                b.is_input = io == "in";
                b.shape.resize(ndim);
                for(auto& s : b.shape)
                    in >> s;
                if(b.is_input)
                {
                    int64_t n;
                    in >> n;
                    b.values.resize(n);
                    for(auto& v : b.values)
                        in >> v;
                }
                c.buffers[idx] = std::move(b);
            }
        }
    }
    return any;
}

inline std::optional<int64_t> opt_int(Case& c, int idx)
{
    const std::string& v = c.opts.at(idx);
    if(v == "-")
        return std::nullopt;
    return std::stoll(v);
}

#ifdef EMU_TORCH_API
inline std::optional<at::ScalarType> opt_scalar_type(Case& c, int idx)
{
    static const std::map<std::string, at::ScalarType> names = {
        {"BFloat16", at::ScalarType::BFloat16},
        {"Half", at::ScalarType::Half},
        {"Float", at::ScalarType::Float},
        {"Float8_e4m3fn", at::ScalarType::Float8_e4m3fn},
        {"Float8_e4m3fnuz", at::ScalarType::Float8_e4m3fnuz},
        {"Float8_e5m2", at::ScalarType::Float8_e5m2},
        {"Float8_e5m2fnuz", at::ScalarType::Float8_e5m2fnuz},
        {"Int", at::ScalarType::Int},
        {"Char", at::ScalarType::Char},
        {"Byte", at::ScalarType::Byte},
    };
    const std::string& v = c.opts.at(idx);
    if(v == "-")
        return std::nullopt;
    return names.at(v);
}
template <typename T>
T& tensor_arg(Case& c, int idx)
{
    Buffer& b = c.buffers.at(idx);
    auto t    = std::make_shared<at::Tensor>(
        b.storage.data(), b.shape, b.dtype == "u64" ? at::ScalarType::UInt64 : at::ScalarType::Int);
    c.tensors[idx] = t;
    return *t;
}
#else
inline std::optional<int> opt_scalar_type(Case&, int)
{
    throw std::runtime_error("torch scalar types in an aiter_tensor_t build");
}
template <typename T>
T& tensor_arg(Case& c, int idx)
{
    Buffer& b = c.buffers.at(idx);
    auto t    = std::make_shared<aiter_tensor_t>();
    std::memset(t.get(), 0, sizeof(aiter_tensor_t));
    t->ptr    = b.storage.data();
    t->numel_ = static_cast<size_t>(b.numel());
    t->ndim   = static_cast<int>(b.shape.size());
    int64_t stride = 1;
    for(int d = t->ndim - 1; d >= 0; --d)
    {
        t->shape[d]   = b.shape[d];
        t->strides[d] = stride;
        stride *= b.shape[d];
    }
    t->dtype_      = b.dtype == "u64" ? AITER_DTYPE_u64 : AITER_DTYPE_i32;
    t->device_id   = 0;
    c.tensors[idx] = t;
    return *t;
}
#endif

// Canaries of run r: every run has its own output fill word; runs 1 and 3 alone change the
// tail after each input (large / zero values) and runs 2 and 4 alone the LDS fill, so a
// difference from run 0 names the source of an undefined value.
constexpr int kRuns = 5;
inline uint32_t output_canary(int run)
{
    static const uint32_t words[kRuns] = {0x5A5A5A5Au, 0x3C3C3C3Cu, 0x69696969u, 0x1E1E1E1Eu, 0x4B4B4B4Bu};
    return words[run];
}
inline int32_t input_tail(int run, int i)
{
    if(run == 1)
        return 2000 + 13 * i;
    if(run == 3)
        return 0;
    return 1000 + 7 * i;
}
inline uint32_t lds_canary(int run) { return run == 2 ? 1000u : run == 4 ? 0u : 3u; }

inline void fill_words(std::vector<uint8_t>& storage, uint32_t word)
{
    auto* p = reinterpret_cast<uint32_t*>(storage.data());
    std::fill(p, p + storage.size() / 4, word);
}

inline void prepare(Case& c, int run)
{
    for(auto& [name, value] : c.env)
    {
        if(value == "-")
            unsetenv(name.c_str());
        else
            setenv(name.c_str(), value.c_str(), 1);
    }
    auto& lds = emu::lds_storage();
    lds.assign(static_cast<size_t>(emu::device().lds_bytes), 0);
    fill_words(lds, lds_canary(run));
    for(auto& [idx, b] : c.buffers)
    {
        const int64_t n = b.numel();
        if(b.is_input)
        {
            b.storage.assign(static_cast<size_t>(n + kInputTail) * b.elem(), 0);
            auto* p = reinterpret_cast<int32_t*>(b.storage.data());
            for(int64_t i = 0; i < n; ++i)
                p[i] = static_cast<int32_t>(b.values[i]);
            for(int i = 0; i < kInputTail; ++i)
                p[n + i] = input_tail(run, i);
        }
        else
        {
            b.storage.assign(static_cast<size_t>(n + kOutputTail) * b.elem(), 0);
            fill_words(b.storage, output_canary(run));
        }
    }
}

// What the runs of one case found, per output buffer: run 0's values, and per element a flag byte
// (kStored: some run changed it from its canary; kPastEnd / kFromLds: its value changed with the
// input tails / the LDS fill; kCanaryHit: stored, yet some run left its canary there), and the
// tail elements (past the buffer's end) that any run changed, with run 0's value there.
enum : uint8_t
{
    kStored    = 1,
    kPastEnd   = 2,
    kFromLds   = 4,
    kCanaryHit = 8,
};
inline bool is_tail_run(int run) { return run == 1 || run == 3; }
inline bool is_lds_run(int run) { return run == 2 || run == 4; }

struct Found
{
    std::vector<uint8_t> first; // run 0's bytes (numel elements)
    std::vector<uint8_t> flags;
    std::map<int64_t, uint64_t> tail;
};

inline uint64_t canary_value(const Buffer& b, int run)
{
    uint64_t canary  = 0;
    const uint32_t w = output_canary(run);
    std::memcpy(&canary, &w, 4);
    if(b.elem() == 8)
        std::memcpy(reinterpret_cast<uint8_t*>(&canary) + 4, &w, 4);
    return canary;
}

template <typename W>
void collect_words(const Buffer& b, int run, Found& f, W canary)
{
    const int64_t n = b.numel();
    const W* v      = reinterpret_cast<const W*>(b.storage.data());
    if(run == 0)
    {
        f.first.assign(b.storage.begin(), b.storage.begin() + n * sizeof(W));
        f.flags.assign(static_cast<size_t>(n), 0);
    }
    const W* v0       = reinterpret_cast<const W*>(f.first.data());
    const uint8_t var = is_tail_run(run) ? kPastEnd : is_lds_run(run) ? kFromLds : 0;
    uint8_t* flags    = f.flags.data();
    for(int64_t i = 0; i < n; ++i)
        flags[i] |= (v[i] != canary ? kStored : kCanaryHit) | (v[i] != v0[i] ? var : 0);
    for(int64_t i = n; i < n + kOutputTail; ++i)
        if(v[i] != canary)
            f.tail.emplace(i - n, run == 0 ? static_cast<uint64_t>(v[i]) : 0); // the first run to write it inserts
}

inline void collect(Case& c, int run, std::map<int, Found>& found)
{
    for(auto& [idx, b] : c.buffers)
    {
        if(b.is_input)
            continue;
        if(b.elem() == 8)
            collect_words<uint64_t>(b, run, found[idx], canary_value(b, run));
        else
            collect_words<uint32_t>(b, run, found[idx], static_cast<uint32_t>(canary_value(b, run)));
    }
}

// Output of one case, after the runs: [ERROR kind file line\nmessage\n] or per output buffer
// "BUF name elem numel\n" + numel*elem value bytes + numel flag bytes, "TAIL name count\n" +
// count*(int64 index, uint64 value) bytes, "ADDR name address\n"; then "DONE\n".
inline void report(Case& c, std::map<int, Found>& found)
{
    for(auto& [idx, b] : c.buffers)
    {
        if(!b.is_input)
        {
            Found& f = found[idx];
            std::printf("BUF %s %zu %lld\n", b.name.c_str(), b.elem(), static_cast<long long>(b.numel()));
            std::fwrite(f.first.data(), 1, f.first.size(), stdout);
            std::fwrite(f.flags.data(), 1, f.flags.size(), stdout);
            std::printf("TAIL %s %zu\n", b.name.c_str(), f.tail.size());
            for(auto& [i, v] : f.tail)
            {
                std::fwrite(&i, 8, 1, stdout);
                std::fwrite(&v, 8, 1, stdout);
            }
        }
        std::printf("ADDR %s %llu\n",
                    b.name.c_str(),
                    static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(b.storage.data())));
    }
}

// Serves case after case from stdin until it closes. An emulation failure ends the process
// (its fibers may be left in any state); a failed check ends only its case.
inline int main_loop()
{
    std::ios::sync_with_stdio(false);
    while(true)
    {
        Case c;
        if(!read_case(std::cin, c))
            return 0;
        std::map<int, Found> found;
        bool failed = false;
        for(int run = 0; run < kRuns && !failed; ++run)
        {
            prepare(c, run);
            try
            {
                dispatch(c);
                collect(c, run, found);
            }
            catch(const emu::CheckFailure& e)
            {
                if(run > 0)
                {
                    std::printf("EMUFAIL\na check failed in run %d only: %s\n", run, e.what());
                    std::fflush(stdout);
                    return 3;
                }
                std::string msg = e.what();
                for(auto& ch : msg)
                    if(ch == '\n')
                        ch = ' ';
                std::printf("ERROR %s %s %d\n%s\n", e.kind.c_str(), e.file.c_str(), e.line, msg.c_str());
                failed = true;
            }
            catch(const emu::EmulationError& e)
            {
                std::printf("EMUFAIL\n%s\n", e.what());
                std::fflush(stdout);
                return 3;
            }
        }
        if(!failed)
            report(c, found);
        std::printf("DONE\n");
        std::fflush(stdout);
    }
}

} // namespace emu_h
