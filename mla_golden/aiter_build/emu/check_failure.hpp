// A failed AITER_CHECK / TORCH_CHECK: the harness catches it and reports the message verbatim.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace emu {
struct CheckFailure : std::runtime_error
{
    std::string kind, file;
    int line;
    CheckFailure(std::string kind_, std::string file_, int line_, const std::string& message)
        : std::runtime_error(message), kind(std::move(kind_)), file(std::move(file_)), line(line_)
    {
    }
};

template <typename... Args>
[[noreturn]] void check_fail(const char* kind, const char* file, int line, const Args&... args)
{
    std::ostringstream os;
    (void)std::initializer_list<int>{((os << args), 0)...};
    throw CheckFailure(kind, file, line, os.str());
}
} // namespace emu
