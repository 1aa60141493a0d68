// Block sub-allocation and the stream ring (see memory.hpp).
#include "memory.hpp"

#include <algorithm>

namespace tf_gl {

using tf_gpu::align_up;

namespace {

// Throws OUT_OF_MEMORY when the last GL call could not get memory.
void check_memory(const char *what, uint64_t size, const char *label) {
    const GLenum error = glGetError();
    if (error == GL_NO_ERROR) return;
    raise(error == GL_OUT_OF_MEMORY ? TF_STATUS_OUT_OF_MEMORY : TF_STATUS_INTERNAL,
          "cannot allocate %llu bytes on %s: %s failed (GL error 0x%04x)", static_cast<unsigned long long>(size), label,
          what, error);
}

}  // namespace

BufferHandle mapped_buffer(uint64_t size, char **data) {
    GLuint name = 0;
    glGenBuffers(1, &name);
    BufferHandle buffer(name);
    constexpr GLbitfield flags = GL_MAP_READ_BIT | GL_MAP_WRITE_BIT | GL_MAP_PERSISTENT_BIT | GL_MAP_COHERENT_BIT;
    glBindBuffer(GL_COPY_WRITE_BUFFER, name);
    glBufferStorage(GL_COPY_WRITE_BUFFER, static_cast<GLsizeiptr>(size), nullptr, flags);
    check_memory("glBufferStorage (mapped)", size, "the host");
    *data = static_cast<char *>(glMapBufferRange(GL_COPY_WRITE_BUFFER, 0, static_cast<GLsizeiptr>(size), flags));
    check_memory("glMapBufferRange", size, "the host");
    if (!*data)
        raise(TF_STATUS_INTERNAL, "glMapBufferRange of %llu bytes returned NULL",
              static_cast<unsigned long long>(size));
    return buffer;
}

// ---- MemoryPool ------------------------------------------------------------------------------------

std::unique_ptr<MemoryBlock> MemoryPool::new_block(uint64_t size) {
    GLuint name = 0;
    glGenBuffers(1, &name);
    BufferHandle buffer(name);
    glBindBuffer(GL_COPY_WRITE_BUFFER, name);
    // No client access: the driver may place it in device memory. Copies go through the ring.
    glBufferStorage(GL_COPY_WRITE_BUFFER, static_cast<GLsizeiptr>(size), nullptr, 0);
    check_memory("glBufferStorage", size, label_);
    auto block = std::make_unique<MemoryBlock>();
    block->buffer = std::move(buffer);
    block->size = size;
    return block;
}

Allocation MemoryPool::allocate(uint64_t size) {
    const uint64_t need = align_up(std::max<uint64_t>(size, 1), alignment_);
    return blocks_.take(need, block_size_, block_size_, [&](uint64_t n) { return new_block(n); });
}

void MemoryPool::release(Allocation &range) noexcept { blocks_.give(range); }

// ---- StreamRing --------------------------------------------------------------------------------------

StreamRing::StreamRing(uint64_t size, uint64_t alignment) : size_(size), quarter_(size / 4), alignment_(alignment) {
    buffer_ = mapped_buffer(size, &data_);
}

StreamRing::Span StreamRing::take(uint64_t size) {
    collect();
    if (size > quarter_) {
        // Its fence is placed by the next take() or collect(): the commands using it come first.
        Oversized big;
        big.buffer = mapped_buffer(size, &big.data);
        oversized_.push_back(std::move(big));
        return Span{oversized_.back().buffer.get(), 0, oversized_.back().data};
    }
    uint64_t at = align_up(head_, alignment_);
    if (at + size > (quarter_index_ + 1) * quarter_) {
        // Leave this quarter (its commands are all issued) and enter the next one once the device
        // is done with what it held a lap ago.
        fences_[quarter_index_] = SyncHandle(glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0));
        quarter_index_ = (quarter_index_ + 1) % 4;
        if (fences_[quarter_index_]) {
            glClientWaitSync(fences_[quarter_index_].get(), GL_SYNC_FLUSH_COMMANDS_BIT, GL_TIMEOUT_IGNORED);
            fences_[quarter_index_].reset();
        }
        at = quarter_index_ * quarter_;
    }
    head_ = at + size;
    return Span{buffer_.get(), at, data_ + at};
}

void StreamRing::collect() noexcept {
    for (Oversized &big : oversized_)
        if (!big.done) big.done = SyncHandle(glFenceSync(GL_SYNC_GPU_COMMANDS_COMPLETE, 0));
    std::erase_if(oversized_,
                  [](const Oversized &big) { return glClientWaitSync(big.done.get(), 0, 0) != GL_TIMEOUT_EXPIRED; });
}

}  // namespace tf_gl
