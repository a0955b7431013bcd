// Host stand-in for the small part of the torch C++ API that aiter's pre-aiter_tensor_t
// metadata planners use: host tensors of plain memory, scalar types, options, from_blob/empty.
#pragma once

#include "aiter_hip_common.h"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>

// Like torch's own macro, an if-block: aiter's older sources sometimes omit the semicolon.
#define TORCH_CHECK(x, ...)                                                                   \
    if(!(x))                                                                                  \
    {                                                                                         \
        ::emu::check_fail("TORCH_CHECK", __FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__);       \
    }

namespace c10 {
enum class ScalarType : int8_t
{
    Byte,
    Char,
    Short,
    Int,
    Long,
    Half,
    Float,
    Double,
    Bool,
    BFloat16,
    Float8_e4m3fn,
    Float8_e4m3fnuz,
    Float8_e5m2,
    Float8_e5m2fnuz,
    UInt32,
    UInt64,
};
enum class DeviceType : int8_t
{
    CPU,
    CUDA,
    HIP
};
inline size_t element_size(ScalarType t)
{
    switch(t)
    {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Bool:
    case ScalarType::Float8_e4m3fn:
    case ScalarType::Float8_e4m3fnuz:
    case ScalarType::Float8_e5m2:
    case ScalarType::Float8_e5m2fnuz: return 1;
    case ScalarType::Short:
    case ScalarType::Half:
    case ScalarType::BFloat16: return 2;
    case ScalarType::Int:
    case ScalarType::Float:
    case ScalarType::UInt32: return 4;
    default: return 8;
    }
}
struct Device
{
    DeviceType type = DeviceType::CUDA;
    int index       = 0;
    Device(DeviceType t = DeviceType::CUDA, int i = 0) : type(t), index(i) {}
};
} // namespace c10

namespace at {
using c10::DeviceType;
using c10::ScalarType;
using Device = c10::Device;

struct TensorOptions
{
    ScalarType dtype_ = ScalarType::Float;
    Device device_{};
    TensorOptions dtype(ScalarType t) const
    {
        TensorOptions o = *this;
        o.dtype_        = t;
        return o;
    }
    TensorOptions device(Device d) const
    {
        TensorOptions o = *this;
        o.device_       = d;
        return o;
    }
    TensorOptions device(DeviceType t) const { return device(Device(t)); }
    TensorOptions requires_grad(bool) const { return *this; }
};

class Tensor
{
    public:
    Tensor() = default;
    Tensor(void* data, std::vector<int64_t> shape, ScalarType t, std::shared_ptr<void> owner = nullptr)
        : data_(data), shape_(std::move(shape)), type_(t), owner_(std::move(owner))
    {
        strides_.assign(shape_.size(), 1);
        for(int d = static_cast<int>(shape_.size()) - 2; d >= 0; --d)
            strides_[d] = strides_[d + 1] * shape_[d + 1];
    }
    template <typename T = void>
    T* data_ptr() const
    {
        return static_cast<T*>(data_);
    }
    int64_t size(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
    int64_t stride(int i) const { return strides_[i < 0 ? strides_.size() + i : i]; }
    int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
    std::vector<int64_t> sizes() const { return shape_; }
    int64_t numel() const
    {
        int64_t n = 1;
        for(auto s : shape_)
            n *= s;
        return n;
    }
    ScalarType scalar_type() const { return type_; }
    ScalarType dtype() const { return type_; }
    size_t element_size() const { return c10::element_size(type_); }
    TensorOptions options() const { return TensorOptions{}.dtype(type_); }
    Device device() const { return Device(DeviceType::CUDA, 0); }
    bool is_cuda() const { return true; }
    bool is_contiguous() const { return true; }
    Tensor to(DeviceType) const { return *this; }
    Tensor to(Device) const { return *this; }
    Tensor to(const TensorOptions&) const { return *this; }
    Tensor to(ScalarType) const { return *this; }
    Tensor& index_put_(std::initializer_list<int64_t> index, uint64_t value)
    {
        // only the flat 1-D form the planners use (work_metadata_ptrs)
        std::memcpy(static_cast<uint8_t*>(data_) + *index.begin() * element_size(), &value, element_size());
        return *this;
    }
    Tensor contiguous() const { return *this; }
    Tensor& copy_(const Tensor& src)
    {
        std::memmove(data_, src.data_, static_cast<size_t>(numel()) * element_size());
        return *this;
    }
    Tensor& fill_(int64_t value)
    {
        for(int64_t i = 0; i < numel(); ++i)
        {
            if(type_ == ScalarType::Int)
                static_cast<int32_t*>(data_)[i] = static_cast<int32_t>(value);
            else if(element_size() == 8)
                static_cast<int64_t*>(data_)[i] = value;
        }
        return *this;
    }
    Tensor& zero_() { return fill_(0); }

    private:
    void* data_ = nullptr;
    std::vector<int64_t> shape_;
    std::vector<int64_t> strides_;
    ScalarType type_ = ScalarType::Float;
    std::shared_ptr<void> owner_;
};

inline Tensor from_blob(void* data, std::vector<int64_t> shape, const TensorOptions& options)
{
    return Tensor(data, std::move(shape), options.dtype_);
}
inline Tensor empty(std::vector<int64_t> shape, const TensorOptions& options)
{
    int64_t n = 1;
    for(auto s : shape)
        n *= s;
    std::shared_ptr<void> mem(std::calloc(static_cast<size_t>(n > 0 ? n : 1), c10::element_size(options.dtype_)),
                              std::free);
    return Tensor(mem.get(), std::move(shape), options.dtype_, mem);
}
inline Tensor zeros(std::vector<int64_t> shape, const TensorOptions& options) { return empty(std::move(shape), options); }
inline Device device_of(const Tensor&) { return Device(); }

namespace hip {
inline hipStream_t getCurrentHIPStream() { return nullptr; }
struct OptionalHIPGuardMasqueradingAsCUDA
{
    template <typename T>
    explicit OptionalHIPGuardMasqueradingAsCUDA(const T&)
    {
    }
};
} // namespace hip
namespace cuda {
using hip::getCurrentHIPStream;
}
} // namespace at

namespace torch {
using at::DeviceType;
using at::empty;
using at::from_blob;
using at::ScalarType;
using at::Tensor;
using at::TensorOptions;
using at::zeros;
constexpr auto kInt32   = at::ScalarType::Int;
constexpr auto kInt     = at::ScalarType::Int;
constexpr auto kInt64   = at::ScalarType::Long;
constexpr auto kUInt64  = at::ScalarType::UInt64;
constexpr auto kFloat32 = at::ScalarType::Float;
constexpr auto kCPU     = at::DeviceType::CPU;
constexpr auto kCUDA    = at::DeviceType::CUDA;
} // namespace torch
using at::device_of;
