#pragma once
#include "torch_shim.hpp"
