// DistributedDataParallel: parameter broadcast, gradient buckets filled by post-accumulate grad
// hooks during backward, nonblocking allreduce per bucket, weighted average, no_sync.
#include <cstring>

#include "state.hpp"

namespace tinyfin::dist {

// One bucket: consecutive parameters (in reverse registration order, roughly the order backward
// finishes them) whose gradients are reduced by one MPI_Iallreduce in a host buffer.
struct DistributedDataParallel::Bucket {
    std::vector<std::size_t> params;
    std::vector<std::size_t> offsets;  // in elements, per slot
    std::vector<float> buffer;
    std::vector<char> ready;
    std::size_t pending = 0;  // slots not ready in this exchange
    MPI_Request request = MPI_REQUEST_NULL;
};

namespace {

uint64_t fnv(uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
    return h;
}

MPI_Comm comm_of(Context &ctx) { return *static_cast<MPI_Comm *>(ctx.native_communicator()); }

}  // namespace

DistributedDataParallel::DistributedDataParallel(Context &context, std::shared_ptr<nn::Module> module,
                                                 DDPOptions options)
    : context_(context), module_(std::move(module)), options_(options) {
    if (!module_) throw ValueError("ValueError: DistributedDataParallel: the module is null");
    register_module("module", module_);
    for (const Tensor &p : module_->parameters()) {
        if (!p.requires_grad()) continue;
        if (p.dtype() != DType::f32 && p.dtype() != DType::f16 && p.dtype() != DType::bf16)
            throw DTypeError(std::string("DTypeError: DistributedDataParallel: parameters must be "
                                         "f32, f16 or bf16 to be averaged over MPI, got ") +
                             dtype_name(p.dtype()) + " " + shape_str(p.shape()));
        params_.push_back(p);
    }

    // The same layout on every rank, or the buckets would pair unrelated gradients.
    uint64_t layout = fnv(1469598103934665603ull, params_.size());
    for (const Tensor &p : params_) {
        layout = fnv(layout, static_cast<uint64_t>(p.dtype()));
        layout = fnv(layout, static_cast<uint64_t>(p.rank()));
        for (int64_t d : p.shape()) layout = fnv(layout, static_cast<uint64_t>(d));
    }
    auto mine = static_cast<int64_t>(layout);
    std::vector<int64_t> all =
        context_.all_gather(from_vector<int64_t>({mine}, {1}, Device{"cpu", 0})).to_vector<int64_t>();
    for (std::size_t r = 0; r < all.size(); ++r)
        if (all[r] != all[0])
            throw MismatchError("MismatchError: DistributedDataParallel: rank " + std::to_string(r) +
                                "'s model has a different parameter layout (count or shapes) "
                                "than rank 0's; build the same model on every rank");

    if (options_.broadcast_parameters) {
        NoGradGuard no_grad;
        for (const Tensor &p : params_) context_.broadcast(p, 0);
    }

    // Buckets in reverse order: the last layers' gradients are final first in backward.
    slot_of_.resize(params_.size());
    std::size_t bytes = 0;
    for (std::size_t k = params_.size(); k-- > 0;) {
        if (buckets_.empty() || bytes >= options_.bucket_bytes) {
            buckets_.push_back(std::make_unique<Bucket>());
            bytes = 0;
        }
        Bucket &b = *buckets_.back();
        std::size_t offset = b.buffer.size();
        slot_of_[k] = {buckets_.size() - 1, b.params.size()};
        b.params.push_back(k);
        b.offsets.push_back(offset);
        b.buffer.resize(offset + static_cast<std::size_t>(params_[k].numel()));
        bytes += params_[k].nbytes();
    }
    for (auto &b : buckets_) {
        b->ready.assign(b->params.size(), 0);
        b->pending = b->params.size();
    }
    for (std::size_t k = 0; k < params_.size(); ++k)
        hook_ids_.push_back(
            register_post_accumulate_grad_hook(params_[k], [this, k](const Tensor &) { on_gradient(k); }));
}

DistributedDataParallel::~DistributedDataParallel() {
    for (std::size_t k = 0; k < params_.size() && k < hook_ids_.size(); ++k)
        remove_post_accumulate_grad_hook(params_[k], hook_ids_[k]);
    // A bucket still in flight (an exception between backward and synchronize_gradients, a
    // TimeoutError) cannot be waited for, since its peers may be gone, nor freed (MPI forbids
    // MPI_Request_free on a collective): its buffer is left allocated for MPI to finish into.
    // Context::abort is the only safe continuation then anyway.
    for (auto &b : buckets_) {
        int done = 1;
        if (b->request != MPI_REQUEST_NULL) MPI_Test(&b->request, &done, MPI_STATUS_IGNORE);
        if (!done) b.release();
    }
}

std::string DistributedDataParallel::describe() const {
    return "DistributedDataParallel(world " + std::to_string(context_.world_size()) + ", " +
           std::to_string(buckets_.size()) + " buckets, " + module_->describe() + ")";
}

void DistributedDataParallel::set_batch_size(int64_t local_samples) {
    if (local_samples < 0)
        throw ValueError("ValueError: set_batch_size: " + std::to_string(local_samples) +
                         " samples; pass a count >= 0");
    weight_ = static_cast<double>(local_samples);
}

void DistributedDataParallel::stage(std::size_t k) {
    auto [bi, si] = slot_of_[k];
    Bucket &b = *buckets_[bi];
    if (b.ready[si])
        throw DistError("DistError: DistributedDataParallel: the gradient of parameter " + std::to_string(k) + " " +
                        shape_str(params_[k].shape()) +
                        " was produced twice before synchronize_gradients(); accumulate over "
                        "several backward passes inside no_sync()");
    float *slot = b.buffer.data() + b.offsets[si];
    const Tensor &p = params_[k];
    auto n = static_cast<std::size_t>(p.numel());
    Tensor g = p.grad();
    // Buckets hold f32: f16 and bf16 gradients are widened here and summed in f32.
    if (g.defined() && g.dtype() != DType::f32) {
        NoGradGuard no_grad;
        g = g.to(DType::f32);
    }
    if (g.defined())
        g.copy_to_host(slot, n * sizeof(float));
    else
        std::memset(slot, 0, n * sizeof(float));
    if (weight_ != 1) {
        auto w = static_cast<float>(weight_);
        for (std::size_t i = 0; i < n; ++i) slot[i] *= w;
    }
    b.ready[si] = 1;
    --b.pending;
}

// Buckets start strictly in index order, the same on every rank: MPI requires collectives on a
// communicator to be started in one order everywhere, whatever order backward finishes them in.
void DistributedDataParallel::launch_ready() {
    MPI_Comm comm = comm_of(context_);
    while (next_launch_ < buckets_.size() && buckets_[next_launch_]->pending == 0) {
        Bucket &b = *buckets_[next_launch_];
        context_.check(MPI_Iallreduce(MPI_IN_PLACE, b.buffer.data(), static_cast<int>(b.buffer.size()), MPI_FLOAT,
                                      MPI_SUM, comm, &b.request),
                       "DistributedDataParallel: allreduce of bucket " + std::to_string(next_launch_));
        ++next_launch_;
    }
}

void DistributedDataParallel::on_gradient(std::size_t k) {
    if (!syncing_) return;
    stage(k);
    launch_ready();
    // Open MPI progresses nonblocking collectives only inside MPI calls: a test per hook keeps the
    // started buckets moving while backward computes the next gradients.
    for (std::size_t i = 0; i < next_launch_; ++i) {
        int done = 0;
        if (buckets_[i]->request != MPI_REQUEST_NULL)
            context_.check(MPI_Test(&buckets_[i]->request, &done, MPI_STATUS_IGNORE),
                           "DistributedDataParallel: progress");
    }
}

void DistributedDataParallel::synchronize_gradients() {
    if (!syncing_) return;
    started_in_backward_ = next_launch_;
    for (std::size_t k = 0; k < params_.size(); ++k) {
        auto [bi, si] = slot_of_[k];
        if (!buckets_[bi]->ready[si]) stage(k);
    }
    launch_ready();

    // The total weight travels with the buckets; waiting for all at once honours the timeout.
    double weight = weight_, total = 0;
    std::vector<MPI_Request> requests;
    for (auto &b : buckets_) requests.push_back(b->request);
    requests.push_back(MPI_REQUEST_NULL);
    context_.check(MPI_Iallreduce(&weight, &total, 1, MPI_DOUBLE, MPI_SUM, comm_of(context_), &requests.back()),
                   "DistributedDataParallel: allreduce of the batch sizes");
    context_.wait_all(requests.data(), static_cast<int>(requests.size()), "DistributedDataParallel gradient allreduce");
    for (auto &b : buckets_) b->request = MPI_REQUEST_NULL;
    if (total <= 0)
        throw ValueError("ValueError: DistributedDataParallel: set_batch_size gave 0 samples on "
                         "every rank; at least one rank needs samples to average over");

    auto factor = static_cast<float>(1.0 / total);
    for (auto &b : buckets_) {
        for (float &v : b->buffer) v *= factor;
        for (std::size_t si = 0; si < b->params.size(); ++si) {
            const Tensor &p = params_[b->params[si]];
            const float *slot = b->buffer.data() + b->offsets[si];
            std::size_t bytes = p.nbytes();
            Tensor g = p.grad();
            if (p.dtype() != DType::f32) {
                // The average rounded once to the parameter's dtype, on its device.
                Tensor average = from_host(slot, p.shape(), DType::f32, p.device());
                NoGradGuard no_grad;
                if (g.defined())
                    g.assign_(average);
                else
                    const_cast<Tensor &>(p).set_grad(average.to(p.dtype()));
                b->ready[si] = 0;
                continue;
            }
            void *host = g.defined() && g.is_contiguous() ? g.host_data() : nullptr;
            if (host) {
                std::memcpy(host, slot, bytes);
            } else if (g.defined() && g.is_contiguous()) {
                copy_from_host(g, slot, bytes);
            } else {
                const_cast<Tensor &>(p).set_grad(from_host(slot, p.shape(), DType::f32, p.device()));
            }
            b->ready[si] = 0;
        }
        b->pending = b->params.size();
    }
    next_launch_ = 0;
    weight_ = 1;
}

void DistributedDataParallel::backward(const Tensor &loss) {
    loss.backward();
    synchronize_gradients();
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel &ddp) : ddp_(ddp), previous_(ddp.syncing_) {
    ddp_.syncing_ = false;
}
DistributedDataParallel::NoSync::~NoSync() { ddp_.syncing_ = previous_; }

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_layout() const {
    std::vector<std::vector<std::size_t>> out;
    for (const auto &b : buckets_) out.push_back(b->params);
    return out;
}

}  // namespace tinyfin::dist
