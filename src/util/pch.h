// Precompiled header: the heavy, stable third-party headers every translation unit uses.
#pragma once
#include <torch/torch.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>
#include <filesystem>
#include <map>
#include <string>
#include <vector>
