// Compute pipelines: one per kernel, created on first use from the embedded SPIR-V, through a
// VkPipelineCache kept on disk between runs ($XDG_CACHE_HOME/tinyfin/vulkan-pipelines.bin, or
// ~/.cache/tinyfin/...). Reading or writing the file may fail: the plugin then works uncached.
#include "device.hpp"
#include "shaders_embedded.h"

#include "atomic_file.hpp"
#include "regular_file.hpp"

#include <tinyfin/plugin_kit/gpu/cache_directory.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace tf_vk {

namespace {

// The largest cache file read or written. lavapipe's cache for every kernel of this plugin is
// well under 1 MiB; a driver's for real GPUs a few MiB. A larger file (or a link to /dev/zero
// with its size of 0, which read_regular_file refuses as no regular file) is not read.
constexpr std::size_t max_cache_bytes = 64u << 20;

// The header every VkPipelineCache blob starts with (VkPipelineCacheHeaderVersionOne).
bool matches_device(const std::vector<char> &blob, const VkPhysicalDeviceProperties &props) {
    if (blob.size() < 16 + VK_UUID_SIZE) return false;
    uint32_t words[4];
    std::memcpy(words, blob.data(), sizeof words);
    return words[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE && words[2] == props.vendorID &&
           words[3] == props.deviceID && std::memcmp(blob.data() + 16, props.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

}  // namespace

void Device::load_pipeline_cache() {
    const std::string dir = tf_kit::gpu::cache_directory("");
    if (!dir.empty())
        cache_path_ =
            dir + (index_ == 0 ? "/vulkan-pipelines.bin" : "/vulkan-pipelines." + std::to_string(index_) + ".bin");
    std::vector<char> blob;
    std::string refused;
    if (!cache_path_.empty() && access(cache_path_.c_str(), F_OK) == 0 &&
        !tf_common::read_regular_file(cache_path_, max_cache_bytes, blob, refused)) {
        blob.clear();
        log_line(TF_LOG_INFO, "%s: pipeline cache %s ignored: %s", label(), cache_path_.c_str(), refused.c_str());
    }
    // A blob from another driver or device is ignored rather than handed to the driver.
    if (!matches_device(blob, props_)) blob.clear();
    VkPipelineCacheCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
    info.initialDataSize = blob.size();
    info.pInitialData = blob.empty() ? nullptr : blob.data();
    VkPipelineCache cache = VK_NULL_HANDLE;
    VkResult result = vkCreatePipelineCache(device_.get(), &info, nullptr, &cache);
    if (result != VK_SUCCESS && !blob.empty()) {
        info.initialDataSize = 0;
        info.pInitialData = nullptr;
        result = vkCreatePipelineCache(device_.get(), &info, nullptr, &cache);
    }
    check(result, "vkCreatePipelineCache");
    pipeline_cache_ = PipelineCacheHandle(device_.get(), cache);
    log_line(TF_LOG_DEBUG, "%s: pipeline cache %s (%zu bytes loaded)", label(),
             cache_path_.empty() ? "in memory only" : cache_path_.c_str(), blob.size());
}

void Device::save_pipeline_cache() noexcept {
    if (!cache_dirty_ || cache_path_.empty() || !pipeline_cache_) return;
    size_t size = 0;
    if (vkGetPipelineCacheData(device_.get(), pipeline_cache_.get(), &size, nullptr) != VK_SUCCESS || size == 0) return;
    if (size > max_cache_bytes) return;
    std::vector<char> blob(size);
    if (vkGetPipelineCacheData(device_.get(), pipeline_cache_.get(), &size, blob.data()) != VK_SUCCESS) return;
    const std::string dir = cache_path_.substr(0, cache_path_.rfind('/'));
    const std::string parent = dir.substr(0, dir.rfind('/'));
    mkdir(parent.c_str(), 0700);
    mkdir(dir.c_str(), 0700);
    // A fresh temp file renamed over the old one (common/atomic_file.hpp): concurrent processes
    // never read a half-written file, and a file planted in the directory is never written to.
    const std::string why = tf_common::write_file_atomically(cache_path_, blob.data(), size, 0600);
    if (!why.empty())
        log_line(TF_LOG_INFO, "%s: could not write the pipeline cache (not fatal): %s", label(), why.c_str());
}

VkPipeline Device::pipeline_for(const PipelineKey &key) {
    auto found = pipelines_.find(key);
    if (found != pipelines_.end()) return found->second.get();
    const auto start = std::chrono::steady_clock::now();
    const tf_shaders::ShaderCode &code = tf_shaders::shader_code_of(key.kernel);
    VkShaderModuleCreateInfo module_info{};
    module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    module_info.codeSize = code.size * sizeof(uint32_t);
    module_info.pCode = code.data;
    VkShaderModule module = VK_NULL_HANDLE;
    check_result(vkCreateShaderModule(device_.get(), &module_info, nullptr, &module), "vkCreateShaderModule");
    ShaderModuleHandle module_owner(device_.get(), module);

    VkSpecializationMapEntry entries[8];
    for (uint32_t i = 0; i < key.count; ++i) entries[i] = {i, i * 4, 4};
    VkSpecializationInfo spec{key.count, entries, key.count * sizeof(uint32_t), key.spec.data()};
    VkComputePipelineCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.stage.pSpecializationInfo = key.count ? &spec : nullptr;
    info.layout = pipeline_layout_.get();
    VkPipeline pipeline = VK_NULL_HANDLE;
    check_result(vkCreateComputePipelines(device_.get(), pipeline_cache_.get(), 1, &info, nullptr, &pipeline),
                 "vkCreateComputePipelines");
    pipelines_.emplace(key, PipelineHandle(device_.get(), pipeline));
    cache_dirty_ = true;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    char spec_text[96] = "";
    for (uint32_t i = 0, at = 0; i < key.count && at < sizeof spec_text; ++i)
        at += static_cast<uint32_t>(
            std::snprintf(spec_text + at, sizeof spec_text - at, "%s%u", i ? "," : "", key.spec[i]));
    log_line(TF_LOG_DEBUG, "%s: pipeline %s(%s) created in %.1f ms (%zu pipelines)", label(), code.name, spec_text, ms,
             pipelines_.size());
    return pipeline;
}

}  // namespace tf_vk
