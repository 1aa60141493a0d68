// Device creation, memory pools, buffers and the batch machinery (see device.hpp).
#include "device.hpp"

#include <tinyfin/env.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace tf_vk {

namespace {

// A batch is submitted after this many commands, so the device works while the host records.
constexpr uint32_t submit_after = 64;
// Per batch: parameter bytes and descriptor sets (one per dispatch).
constexpr uint64_t params_bytes = 256 * 1024;
constexpr uint32_t sets_per_batch = 1024;
// Status words per batch: one per reporting dispatch (a batch holds at most submit_after commands).
constexpr uint32_t report_slots = submit_after;
// Block sizes of the memory pools.
constexpr uint64_t device_block = 64ull << 20;
constexpr uint64_t host_block = 16ull << 20;

const char *api_text(uint32_t version, char *buf, size_t size) {
    std::snprintf(buf, size, "%u.%u.%u", VK_API_VERSION_MAJOR(version), VK_API_VERSION_MINOR(version),
                  VK_API_VERSION_PATCH(version));
    return buf;
}

// One extension struct (of structure type type) of what query fills for a physical device, read
// through query's outer struct (of outer_type): vkGetPhysicalDeviceProperties2 and its
// VkPhysicalDeviceProperties2, vkGetPhysicalDeviceMemoryProperties2 and its
// VkPhysicalDeviceMemoryProperties2 (Vulkan 1.1).
template <class Extension, class Outer>
Extension chained_query(VkPhysicalDevice physical, VkStructureType type, void (*query)(VkPhysicalDevice, Outer *),
                        VkStructureType outer_type) {
    Extension extension{};
    extension.sType = type;
    Outer outer{};
    outer.sType = outer_type;
    outer.pNext = &extension;
    query(physical, &outer);
    return extension;
}

template <class Extension>
Extension properties_of(VkPhysicalDevice physical, VkStructureType type) {
    return chained_query<Extension>(physical, type, vkGetPhysicalDeviceProperties2,
                                    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
}

bool has_extension(const std::vector<VkExtensionProperties> &list, const char *name) {
    return std::any_of(list.begin(), list.end(),
                       [&](const auto &e) { return std::strcmp(e.extensionName, name) == 0; });
}

// The memory type for tensors: the largest device-local heap, host-visible and coherent when
// such a type exists there (integrated GPUs, lavapipe); any type when nothing is device-local.
uint32_t pick_device_type(const VkPhysicalDeviceMemoryProperties &m, bool *host_visible) {
    constexpr VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int best = -1;
    for (uint32_t i = 0; i < m.memoryTypeCount; ++i) {
        const VkMemoryType &t = m.memoryTypes[i];
        if (!(t.propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) continue;
        if (best < 0) {
            best = static_cast<int>(i);
            continue;
        }
        const VkMemoryType &b = m.memoryTypes[best];
        const uint64_t size_t_ = m.memoryHeaps[t.heapIndex].size, size_b = m.memoryHeaps[b.heapIndex].size;
        if (size_t_ > size_b ||
            (size_t_ == size_b && (t.propertyFlags & host) == host && (b.propertyFlags & host) != host))
            best = static_cast<int>(i);
    }
    if (best < 0) best = 0;
    *host_visible = (m.memoryTypes[best].propertyFlags & host) == host;
    return static_cast<uint32_t>(best);
}

// The memory type for staging and parameters: host-visible and coherent, cached if possible.
uint32_t pick_host_type(const VkPhysicalDeviceMemoryProperties &m) {
    constexpr VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int best = -1;
    for (uint32_t i = 0; i < m.memoryTypeCount; ++i) {
        const VkMemoryPropertyFlags f = m.memoryTypes[i].propertyFlags;
        if ((f & host) != host) continue;
        if (best < 0 || ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) &&
                         !(m.memoryTypes[best].propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT)))
            best = static_cast<int>(i);
    }
    if (best < 0) raise(TF_STATUS_UNAVAILABLE, "the device has no host-visible coherent memory");
    return static_cast<uint32_t>(best);
}

}  // namespace

// ---- Creation ----------------------------------------------------------------------------------

std::unique_ptr<Device> Device::create(int index, const ComputeDevice &where, uint32_t instance_api) {
    std::unique_ptr<Device> d(new Device());
    d->index_ = index;
    d->physical_ = where.physical;
    d->family_ = where.queue_family;
    d->instance_api_ = instance_api;
    vkGetPhysicalDeviceProperties(where.physical, &d->props_);
    d->label_ = "vulkan:" + std::to_string(index) + " (" + d->props_.deviceName + ")";
    const VkPhysicalDeviceLimits &limits = d->props_.limits;
    d->caps_.max_binding = limits.maxStorageBufferRange;
    d->caps_.bind_align = std::max<uint64_t>(limits.minStorageBufferOffsetAlignment, 16);
    for (int i = 0; i < 3; ++i) d->caps_.max_groups[i] = limits.maxComputeWorkGroupCount[i];

    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(where.physical, nullptr, &n_ext, nullptr);
    std::vector<VkExtensionProperties> extensions(n_ext);
    vkEnumerateDeviceExtensionProperties(where.physical, nullptr, &n_ext, extensions.data());
    const bool core_1_1 = instance_api >= VK_API_VERSION_1_1 && d->props_.apiVersion >= VK_API_VERSION_1_1;
    d->has_budget_ = core_1_1 && has_extension(extensions, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    if (core_1_1) {
        const auto id = properties_of<VkPhysicalDeviceIDProperties>(where.physical,
                                                                    VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES);
        char hex[2 * VK_UUID_SIZE + 1];
        for (uint32_t i = 0; i < VK_UUID_SIZE; ++i) std::snprintf(hex + 2 * i, 3, "%02x", id.deviceUUID[i]);
        d->uuid_ = hex;
    }

    // "llvmpipe: Mesa 22.3.6 (LLVM 15.0.6)" where the driver says (Vulkan 1.2), else the raw version.
    char raw[32];
    std::snprintf(raw, sizeof raw, "driver version 0x%08x", d->props_.driverVersion);
    d->driver_ = raw;
    if (core_1_1 && d->props_.apiVersion >= VK_API_VERSION_1_2) {
        const auto driver = properties_of<VkPhysicalDeviceDriverProperties>(
            where.physical, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
        d->driver_ = std::string(driver.driverName) + ": " + driver.driverInfo;
    }

    VkPhysicalDeviceFeatures supported{};
    vkGetPhysicalDeviceFeatures(where.physical, &supported);
    VkPhysicalDeviceFeatures enabled{};
    // The kernels index the tensor array with constants once inlined; enable dynamic indexing
    // where offered so the SPIR-V is valid as written.
    enabled.shaderStorageBufferArrayDynamicIndexing = supported.shaderStorageBufferArrayDynamicIndexing;

    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue_info{};
    queue_info.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    queue_info.queueFamilyIndex = where.queue_family;
    queue_info.queueCount = 1;
    queue_info.pQueuePriorities = &priority;
    std::vector<const char *> enable;
    if (d->has_budget_) enable.push_back(VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    VkDeviceCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue_info;
    info.enabledExtensionCount = static_cast<uint32_t>(enable.size());
    info.ppEnabledExtensionNames = enable.data();
    info.pEnabledFeatures = &enabled;
    VkDevice handle = VK_NULL_HANDLE;
    check(vkCreateDevice(where.physical, &info, nullptr, &handle), "vkCreateDevice");
    d->device_ = DeviceHandle(handle);
    vkGetDeviceQueue(handle, where.queue_family, 0, &d->queue_);

    VkPhysicalDeviceMemoryProperties memory;
    vkGetPhysicalDeviceMemoryProperties(where.physical, &memory);
    d->create_pools(memory);
    d->create_layouts();
    d->load_pipeline_cache();
    d->create_batches();
    char api[32];
    log_line(TF_LOG_DEBUG, "%s: Vulkan %s, queue family %u, %s memory, %" PRIu64 " MiB heap", d->label(),
             api_text(d->props_.apiVersion, api, sizeof api), d->family_,
             d->host_visible_ ? "host-visible" : "device-only", d->heap_size_ >> 20);
    return d;
}

void Device::create_pools(const VkPhysicalDeviceMemoryProperties &memory) {
    VkDevice dev = device_.get();
    const uint32_t type = pick_device_type(memory, &host_visible_);
    const char *staging = get_env("TINYFIN_VULKAN_STAGING");
    // TINYFIN_VULKAN_STAGING=1 takes the staging path of devices without host-visible memory,
    // so lavapipe can test it.
    int force = 0;
    if (tf_env_parse_flag(staging, &force) == TF_ENV_INVALID) {
        char message[TF_TEXT_SIZE];
        tf_env_describe_bad(message, sizeof message, "TINYFIN_VULKAN_STAGING", staging, "0 or 1",
                            "0 (host-visible memory where the device has it)");
        int strict = 0;
        tf_env_parse_strict(get_env("TINYFIN_STRICT"), &strict);
        if (strict) raise(TF_STATUS_INVALID_ARGUMENT, "%s (an error because TINYFIN_STRICT=1)", message);
        log_line(TF_LOG_WARN, "%s", message);
    }
    const bool force_staging = force == 1;
    heap_index_ = memory.memoryTypes[type].heapIndex;
    heap_size_ = memory.memoryHeaps[heap_index_].size;
    uint64_t max_allocation = heap_size_;
    if (instance_api_ >= VK_API_VERSION_1_1 && props_.apiVersion >= VK_API_VERSION_1_1) {
        const auto m3 = properties_of<VkPhysicalDeviceMaintenance3Properties>(
            physical_, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
        if (m3.maxMemoryAllocationSize > 0)
            max_allocation = std::min<uint64_t>(max_allocation, m3.maxMemoryAllocationSize);
    }
    const uint64_t align = std::max<uint64_t>(caps_.bind_align, 256);
    device_pool_ = std::make_unique<MemoryPool>(
        dev, MemoryPool::Options{type, host_visible_, heap_size_, max_allocation,
                                 std::min(device_block, max_allocation), align, label_.c_str()});
    if (force_staging) host_visible_ = false;
    const uint32_t host_type = pick_host_type(memory);
    const uint64_t host_heap = memory.memoryHeaps[memory.memoryTypes[host_type].heapIndex].size;
    host_pool_ = std::make_unique<MemoryPool>(
        dev, MemoryPool::Options{host_type, true, host_heap, std::min(host_heap, max_allocation),
                                 std::min(host_block, max_allocation), align, label_.c_str()});
    status_ = host_pool_->allocate(4);
    std::memset(status_.owner->mapped + status_.offset, 0, 4);
}

void Device::create_layouts() {
    VkDevice dev = device_.get();
    VkDescriptorSetLayoutBinding bindings[3]{};
    const uint32_t counts[3] = {1, 1, tensor_slots};
    for (uint32_t i = 0; i < 3; ++i) {
        bindings[i].binding = i;
        bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        bindings[i].descriptorCount = counts[i];
        bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo set_info{};
    set_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    set_info.bindingCount = 3;
    set_info.pBindings = bindings;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    check(vkCreateDescriptorSetLayout(dev, &set_info, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
    set_layout_ = SetLayoutHandle(dev, set_layout);

    VkPipelineLayoutCreateInfo layout_info{};
    layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    layout_info.setLayoutCount = 1;
    layout_info.pSetLayouts = &set_layout;
    VkPipelineLayout layout = VK_NULL_HANDLE;
    check(vkCreatePipelineLayout(dev, &layout_info, nullptr, &layout), "vkCreatePipelineLayout");
    pipeline_layout_ = PipelineLayoutHandle(dev, layout);
}

void Device::create_batches() {
    VkDevice dev = device_.get();
    for (Batch &b : batches_) {
        VkCommandPoolCreateInfo pool_info{};
        pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
        pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
        pool_info.queueFamilyIndex = family_;
        VkCommandPool pool = VK_NULL_HANDLE;
        check(vkCreateCommandPool(dev, &pool_info, nullptr, &pool), "vkCreateCommandPool");
        b.pool = CommandPoolHandle(dev, pool);
        VkCommandBufferAllocateInfo cb_info{};
        cb_info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
        cb_info.commandPool = pool;
        cb_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        cb_info.commandBufferCount = 1;
        check(vkAllocateCommandBuffers(dev, &cb_info, &b.commands), "vkAllocateCommandBuffers");

        VkFenceCreateInfo fence_info{};
        fence_info.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
        VkFence fence = VK_NULL_HANDLE;
        check(vkCreateFence(dev, &fence_info, nullptr, &fence), "vkCreateFence");
        b.done = FenceHandle(dev, fence);

        VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, sets_per_batch * (2 + tensor_slots)};
        VkDescriptorPoolCreateInfo dp_info{};
        dp_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
        dp_info.maxSets = sets_per_batch;
        dp_info.poolSizeCount = 1;
        dp_info.pPoolSizes = &size;
        VkDescriptorPool dpool = VK_NULL_HANDLE;
        check(vkCreateDescriptorPool(dev, &dp_info, nullptr, &dpool), "vkCreateDescriptorPool");
        b.descriptors = DescriptorPoolHandle(dev, dpool);
        b.params = host_pool_->allocate(params_bytes);
        b.status = host_pool_->allocate(report_slots * caps_.bind_align);
        std::memset(b.status.owner->mapped + b.status.offset, 0, report_slots * caps_.bind_align);
    }
}

Device::~Device() {
    // Nothing may still run when memory goes back. (A device whose creation failed half-way
    // comes here too: every step checks what exists.)
    if (device_.get() == VK_NULL_HANDLE) return;
    vkDeviceWaitIdle(device_.get());
    save_pipeline_cache();
    for (Batch &b : batches_) {
        for (auto &[pool, range] : b.temporaries) pool->release(range);
        b.temporaries.clear();
        if (host_pool_) host_pool_->release(b.params);
        if (host_pool_) host_pool_->release(b.status);
    }
    for (auto &[serial, buffer] : deferred_) release_now(buffer);
    deferred_.clear();
    // Buffers the core never freed (tensors that outlive the registry).
    for (tf_buffer *buffer : live_) release_now(buffer);
    live_.clear();
    if (host_pool_) host_pool_->release(status_);
}

// ---- Information ---------------------------------------------------------------------------------

void Device::info(tf_device_info &out) const {
    int32_t kind = TF_DEVICE_KIND_OTHER;
    switch (props_.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: kind = TF_DEVICE_KIND_GPU_DISCRETE; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: kind = TF_DEVICE_KIND_GPU_INTEGRATED; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: kind = TF_DEVICE_KIND_GPU_SOFTWARE; break;
    default: break;
    }
    uint64_t memory_free = heap_size_ > device_pool_->reserved() ? heap_size_ - device_pool_->reserved() : 0;
    if (has_budget_) {
        const auto budget = chained_query<VkPhysicalDeviceMemoryBudgetPropertiesEXT>(
            physical_, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT,
            vkGetPhysicalDeviceMemoryProperties2, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2);
        const uint64_t b = budget.heapBudget[heap_index_], u = budget.heapUsage[heap_index_];
        if (b > 0) memory_free = b > u ? b - u : 0;
    }
    out = tf_kit::device_info_of(kind, heap_size_, memory_free, props_.deviceName, uuid_.c_str());
}

void Device::list_features(tf_feature_fn emit, void *user) const {
    const tf_kit::FeatureList features(emit, user, index_);
    char api[32];
    features.put("api", api_text(props_.apiVersion, api, sizeof api));
    features.put("driver", driver_.c_str());
    features.putf("max_storage_buffer_range", "%" PRIu64, caps_.max_binding);
    features.put("memory", host_visible_ ? "host-visible (no staging)" : "device-local (staging copies)");
    features.put("memory_budget", has_budget_ ? "VK_EXT_memory_budget" : "no");
    features.put("pipeline_cache", cache_path_.empty() ? "none" : cache_path_.c_str());
}

// ---- Buffers -------------------------------------------------------------------------------------

tf_buffer *Device::allocate(uint64_t size) {
    throw_if_lost();
    Allocation range = device_pool_->allocate(size);
    auto buffer = std::make_unique<tf_buffer>(tf_buffer{this, range, size, 0});
    live_.insert(buffer.get());
    return buffer.release();
}

void Device::release_now(tf_buffer *buffer) noexcept {
    device_pool_->release(buffer->memory);
    delete buffer;
}

void Device::free(tf_buffer *buffer) noexcept {
    live_.erase(buffer);
    if (busy(buffer) && !lost_) {
        deferred_.emplace_back(buffer->last_use, buffer);
        return;
    }
    release_now(buffer);
}

void Device::write(tf_buffer *buffer, uint64_t offset, const void *src, uint64_t size) {
    throw_if_lost();
    if (host_visible_ && !busy(buffer)) {
        std::memcpy(buffer->memory.owner->mapped + buffer->memory.offset + offset, src, size);
        return;
    }
    // Through a staging range, in queue order: no wait, even when the buffer is busy.
    Allocation staging = host_pool_->allocate(size);
    std::memcpy(staging.owner->mapped + staging.offset, src, size);
    Batch &b = recording_with(*host_pool_, staging);
    VkBufferCopy region{staging.offset, buffer->memory.offset + offset, size};
    vkCmdCopyBuffer(b.commands, staging.owner->buffer.get(), buffer->memory.owner->buffer.get(), 1, &region);
    barrier(b);
    buffer->last_use = b.serial;
}

void Device::read(tf_buffer *buffer, uint64_t offset, void *dst, uint64_t size) {
    throw_if_lost();
    if (host_visible_) {
        if (busy(buffer)) wait_for(buffer->last_use);
        std::memcpy(dst, buffer->memory.owner->mapped + buffer->memory.offset + offset, size);
        throw_reported();
        return;
    }
    Allocation staging = host_pool_->allocate(size);
    try {
        Batch &b = recording(0);
        VkBufferCopy region{buffer->memory.offset + offset, staging.offset, size};
        vkCmdCopyBuffer(b.commands, buffer->memory.owner->buffer.get(), staging.owner->buffer.get(), 1, &region);
        barrier(b);
        buffer->last_use = b.serial;
        wait_for(b.serial);
        std::memcpy(dst, staging.owner->mapped + staging.offset, size);
    } catch (...) {
        host_pool_->release(staging);
        throw;
    }
    host_pool_->release(staging);
    throw_reported();
}

void Device::copy(tf_buffer *dst, uint64_t dst_offset, tf_buffer *src, uint64_t src_offset, uint64_t size) {
    throw_if_lost();
    VkBuffer from = src->memory.owner->buffer.get(), to = dst->memory.owner->buffer.get();
    const uint64_t a = src->memory.offset + src_offset, b = dst->memory.offset + dst_offset;
    const bool overlap = from == to && a < b + size && b < a + size;
    if (!overlap) {
        Batch &bt = recording(0);
        VkBufferCopy region{a, b, size};
        vkCmdCopyBuffer(bt.commands, from, to, 1, &region);
        barrier(bt);
        src->last_use = dst->last_use = bt.serial;
        return;
    }
    // vkCmdCopyBuffer forbids overlapping regions: go through a temporary range (memmove).
    Allocation temp = device_pool_->allocate(size);
    Batch &bt = recording_with(*device_pool_, temp);
    VkBuffer mid = temp.owner->buffer.get();
    VkBufferCopy first{a, temp.offset, size}, second{temp.offset, b, size};
    vkCmdCopyBuffer(bt.commands, from, mid, 1, &first);
    barrier(bt);
    vkCmdCopyBuffer(bt.commands, mid, to, 1, &second);
    barrier(bt);
    src->last_use = dst->last_use = bt.serial;
}

void Device::synchronize() {
    throw_if_lost();
    wait_for(next_serial_ - 1);
    throw_reported();
}

// ---- Recording -----------------------------------------------------------------------------------

TensorBinding Device::bind(const tf_tensor_desc &t, const char *op, const char *role, uint32_t index) {
    return tf_gpu::bind_pooled(caps_, this, label(), t, op, role, index);
}

void Device::dispatch(const DispatchArgs &args) {
    throw_if_lost();
    if (args.empty()) return;
    VkPipeline pipeline = pipeline_for(args.kernel);
    Batch &b = recording(args.params_size);
    VkDevice dev = device_.get();

    const uint64_t at = align_up(b.params_used, caps_.bind_align);
    std::memcpy(b.params.owner->mapped + b.params.offset + at, args.params, args.params_size);
    b.params_used = at + args.params_size;

    VkDescriptorSetLayout layout = set_layout_.get();
    VkDescriptorSetAllocateInfo alloc_info{};
    alloc_info.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    alloc_info.descriptorPool = b.descriptors.get();
    alloc_info.descriptorSetCount = 1;
    alloc_info.pSetLayouts = &layout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    check_result(vkAllocateDescriptorSets(dev, &alloc_info, &set), "vkAllocateDescriptorSets");
    ++b.sets_used;

    VkDescriptorBufferInfo infos[2 + tensor_slots];
    infos[0] = {b.params.owner->buffer.get(), b.params.offset + at, args.params_size};
    // A reporting kernel gets a word of its own; the others never write theirs.
    infos[1] = {status_.owner->buffer.get(), status_.offset, 4};
    if (args.reporting_op) {
        infos[1] = {b.status.owner->buffer.get(), b.status.offset + b.reports.size() * caps_.bind_align, 4};
        b.reports.emplace_back(args.reporting_op, std::this_thread::get_id());
    }
    for (uint32_t s = 0; s < tensor_slots; ++s) {
        if (s < args.count && args.tensors[s].buffer)
            infos[2 + s] = {args.tensors[s].buffer->memory.owner->buffer.get(), args.tensors[s].offset,
                            args.tensors[s].range};
        else
            infos[2 + s] = infos[1];  // unused slots still need a valid descriptor
    }
    // Bindings 0 and 1 take infos[0] and infos[1]; binding 2's five descriptors infos[2..6].
    VkWriteDescriptorSet writes[3]{};
    const uint32_t counts[3] = {1, 1, tensor_slots};
    for (uint32_t i = 0; i < 3; ++i) {
        writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        writes[i].dstSet = set;
        writes[i].dstBinding = i;
        writes[i].descriptorCount = counts[i];
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(dev, 3, writes, 0, nullptr);

    if (b.bound != pipeline) {
        vkCmdBindPipeline(b.commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
        b.bound = pipeline;
    }
    vkCmdBindDescriptorSets(b.commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_layout_.get(), 0, 1, &set, 0, nullptr);
    vkCmdDispatch(b.commands, args.groups[0], args.groups[1], args.groups[2]);
    barrier(b);
    for (size_t s = 0; s < args.count; ++s)
        if (args.tensors[s].buffer) args.tensors[s].buffer->last_use = b.serial;
    if (b.commands_recorded >= submit_after) submit(b);
}

void Device::barrier(Batch &b) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    constexpr VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(b.commands, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
    ++b.commands_recorded;
}

// ---- Batches -------------------------------------------------------------------------------------

Device::Batch &Device::recording_with(MemoryPool &pool, Allocation range) {
    try {
        Batch &b = recording(0);
        b.temporaries.emplace_back(&pool, range);
        return b;
    } catch (...) {
        pool.release(range);
        throw;
    }
}

Device::Batch &Device::recording(size_t params_size) {
    Batch &b = batches_[current_];
    if (b.state == Batch::State::recording) {
        const bool room = align_up(b.params_used, caps_.bind_align) + params_size <= params_bytes &&
                          b.sets_used < sets_per_batch && b.reports.size() < report_slots;
        if (room) return b;
        submit(b);
        return recording(params_size);
    }
    if (b.state == Batch::State::submitted) {
        // All batches are in flight: wait for the oldest (this one) before reusing it.
        wait_for(b.serial);
    }
    begin(b);
    return b;
}

void Device::begin(Batch &b) {
    poll();
    VkDevice dev = device_.get();
    check_result(vkResetCommandPool(dev, b.pool.get(), 0), "vkResetCommandPool");
    check_result(vkResetDescriptorPool(dev, b.descriptors.get(), 0), "vkResetDescriptorPool");
    VkCommandBufferBeginInfo info{};
    info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    info.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check_result(vkBeginCommandBuffer(b.commands, &info), "vkBeginCommandBuffer");
    b.serial = next_serial_++;
    b.state = Batch::State::recording;
    b.params_used = 0;
    b.sets_used = 0;
    b.commands_recorded = 0;
    b.bound = VK_NULL_HANDLE;
    b.reports.clear();
}

void Device::submit(Batch &b) {
    // Device writes become visible to the host once the fence signals.
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(b.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    check_result(vkEndCommandBuffer(b.commands), "vkEndCommandBuffer");
    VkSubmitInfo info{};
    info.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    info.commandBufferCount = 1;
    info.pCommandBuffers = &b.commands;
    check_result(vkQueueSubmit(queue_, 1, &info, b.done.get()), "vkQueueSubmit");
    b.state = Batch::State::submitted;
    current_ = (current_ + 1) % batches_.size();
}

void Device::wait_for(uint64_t serial) {
    Batch &now = batches_[current_];
    if (now.state == Batch::State::recording && now.serial <= serial) submit(now);
    // Oldest first, so completed_ only moves over finished batches.
    for (;;) {
        Batch *oldest = nullptr;
        for (Batch &b : batches_)
            if (b.state == Batch::State::submitted && b.serial <= serial && (!oldest || b.serial < oldest->serial))
                oldest = &b;
        if (!oldest) break;
        VkFence fence = oldest->done.get();
        check_result(vkWaitForFences(device_.get(), 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
        retire(*oldest);
    }
}

void Device::poll() noexcept {
    for (;;) {
        Batch *oldest = nullptr;
        for (Batch &b : batches_)
            if (b.state == Batch::State::submitted && (!oldest || b.serial < oldest->serial)) oldest = &b;
        if (!oldest || vkGetFenceStatus(device_.get(), oldest->done.get()) != VK_SUCCESS) return;
        retire(*oldest);
    }
}

void Device::retire(Batch &b) {
    VkFence fence = b.done.get();
    vkResetFences(device_.get(), 1, &fence);
    for (auto &[pool, range] : b.temporaries) pool->release(range);
    b.temporaries.clear();
    // The bits each reporting kernel set, kept for the thread that recorded it.
    for (size_t i = 0; i < b.reports.size(); ++i) {
        auto *word = reinterpret_cast<uint32_t *>(b.status.owner->mapped + b.status.offset + i * caps_.bind_align);
        if (__atomic_exchange_n(word, 0u, __ATOMIC_SEQ_CST) == 0) continue;
        reported_.add(b.reports[i].second, b.reports[i].first);
    }
    b.reports.clear();
    b.state = Batch::State::idle;
    completed_ = std::max(completed_, b.serial);
    auto done = std::partition(deferred_.begin(), deferred_.end(), [&](const auto &d) { return d.first > completed_; });
    for (auto it = done; it != deferred_.end(); ++it) release_now(it->second);
    deferred_.erase(done, deferred_.end());
}

void Device::check_result(VkResult result, const char *what) {
    if (result == VK_ERROR_DEVICE_LOST) lost_ = true;
    if (result != VK_SUCCESS) raise(status_of(result), "%s on %s: %s", what, label(), result_name(result));
}

void Device::throw_if_lost() const {
    if (lost_) raise(TF_STATUS_DEVICE_LOST, "%s was lost (VK_ERROR_DEVICE_LOST); its buffers are gone", label());
}

void Device::throw_reported() { reported_.throw_for(std::this_thread::get_id(), label()); }

}  // namespace tf_vk
