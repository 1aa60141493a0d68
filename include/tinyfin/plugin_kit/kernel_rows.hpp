// The plugin kit's kernel tables: a plugin declares its kernels as data, one row per kernel
// {op, dtypes, run, accepts}, and the kit derives supports() and run() from the rows (as ONNX
// Runtime's kernel registry does): the op's rule (rules.hpp, check_op) first, then the first row
// of the op whose dtypes hold the descriptor's working dtype and whose accepts (if any) takes
// it. No plugin writes a switch over ops. docs/writing-a-plugin.md and docs/adding-an-op.md show
// it; plugin_table<Impl> (table.hpp) fills supports and run from Impl::kernels for a host plugin.
#pragma once

#include <tinyfin/plugin_kit/rules.hpp>

#include <cstdint>
#include <initializer_list>
#include <span>

namespace tf_kit TF_KIT_HIDDEN {

// ---- Dtype sets -----------------------------------------------------------------------------------------

// A set of dtypes (dtypes.def's ids, all below 64), as a row's `dtypes`.
struct DtypeSet {
    uint64_t bits = 0;
    constexpr bool has(int32_t dtype) const noexcept { return dtype >= 0 && dtype < 64 && (bits >> dtype & 1); }
    constexpr DtypeSet operator|(DtypeSet o) const noexcept { return {bits | o.bits}; }
};

constexpr DtypeSet dtypes(std::initializer_list<int32_t> list) noexcept {
    DtypeSet s{};
    for (int32_t d : list) s.bits |= uint64_t{1} << d;
    return s;
}

// Every dtype: the row takes whatever the op's rule admits (ops.def's dtypes column and the rule).
inline constexpr DtypeSet k_any_dtype{~uint64_t{0}};
inline constexpr DtypeSet k_f32 = dtypes({TF_DTYPE_F32});
inline constexpr DtypeSet k_float_dtypes = dtypes({TF_DTYPE_F32, TF_DTYPE_F16, TF_DTYPE_BF16});
inline constexpr DtypeSet k_index_dtypes = dtypes({TF_DTYPE_I32, TF_DTYPE_I64});
inline constexpr DtypeSet k_numeric_dtypes = k_float_dtypes | k_index_dtypes;

// The dtype a row's set is matched against: the op's working dtype (ops.hpp: the first input's
// for COMPARE and ARG ops and cast, else output 0's).
inline int32_t row_dtype(const tf_op_desc &op) noexcept {
    OpRule rule{};
    find_op_rule(op.op, &rule);
    return working_dtype(op, rule.kind);
}

// ---- Rows -----------------------------------------------------------------------------------------------

// One kernel. op: its ops.def id. dtypes: the working dtypes it takes. run: the kernel, called
// only with descriptors that passed check_op and this row. accepts: further limits of the kernel
// (layout, sizes, other operands' dtypes, the device's capabilities), nullptr for none.
// Run and Accepts are the plugin's function types: a host plugin's are HostKernel and
// HostAccepts; a device plugin passes its device and capabilities through (find_kernel's ctx).
template <class Run, class Accepts = bool (*)(const tf_op_desc &)>
struct KernelRow {
    uint32_t op;
    DtypeSet dtypes;
    Run run;
    Accepts accepts = nullptr;
};

using HostKernel = tf_status (*)(const tf_op_desc &op, tf_error *err);
using HostAccepts = bool (*)(const tf_op_desc &op);
using HostRow = KernelRow<HostKernel, HostAccepts>;

// The row that runs op: the first whose op is op.op, whose dtypes hold its working dtype and whose
// accepts (called as accepts(ctx..., op)) takes it; nullptr when none does. Rows are tried in
// order, so a faster kernel for part of an op's descriptors goes before its general one.
template <class Row, class... Ctx>
const Row *find_kernel(std::span<const Row> rows, const tf_op_desc &op, const Ctx &...ctx) {
    const int32_t dtype = row_dtype(op);
    for (const Row &row : rows)
        if (row.op == op.op && row.dtypes.has(dtype) && (!row.accepts || row.accepts(ctx..., op))) return &row;
    return nullptr;
}

// Whether any row names the op (for any dtype).
template <class Row>
constexpr bool has_kernel_for(std::span<const Row> rows, uint32_t op) noexcept {
    for (const Row &row : rows)
        if (row.op == op) return true;
    return false;
}

// supports() from rows: the op's rule (check_op, no data) and a row that takes the descriptor.
template <class Row, class... Ctx>
bool rows_support(std::span<const Row> rows, const tf_op_desc *op, const Ctx &...ctx) {
    return check_op(op, false, nullptr) == TF_STATUS_OK && find_kernel(rows, *op, ctx...) != nullptr;
}

// run()'s row: the op's rule (check_op; with need_data, host addresses), then find_kernel into
// *row. A status and err set when the descriptor breaks the rule or no row takes it
// ("softmax: no cpu kernel for i32 with these operands").
template <class Row, class... Ctx>
tf_status kernel_to_run(std::span<const Row> rows, const tf_op_desc *op, bool need_data, tf_error *err, const Row **row,
                        const Ctx &...ctx) {
    *row = nullptr;
    if (tf_status s = check_op(op, need_data, err); s != TF_STATUS_OK) return s;
    *row = find_kernel(rows, *op, ctx...);
    if (*row) return TF_STATUS_OK;
    return fail(err, TF_STATUS_UNSUPPORTED, "%s: no %s kernel for %s with these operands%s", op_name(op->op),
                plugin_name(), dtype_name(row_dtype(*op)),
                has_kernel_for(rows, op->op) ? "" : " (no kernel for the op at all)");
}

// The supports() and run() members of a host plugin (one device, data in host memory) whose
// Impl::kernels is a table of HostRow (or a function returning one): plugin_table<Impl> fills them in when Impl has no
// supports/run of its own. Impl::device_count() bounds the device.
template <class Impl>
struct HostKernelTable {
    // Impl::kernels: an array (or span) of rows, or a function returning a span (a table gathered
    // from several files' rows).
    static std::span<const HostRow> rows() {
        if constexpr (requires { Impl::kernels(); })
            return Impl::kernels();
        else
            return std::span<const HostRow>(Impl::kernels);
    }

    static int32_t supports(int32_t device, const tf_op_desc *op) {
        return guarded_answer([&] { return device >= 0 && device < Impl::device_count() && rows_support(rows(), op); });
    }

    static tf_status run(int32_t device, const tf_op_desc *op, tf_error *err) {
        return guarded(
            err, [op] { return op && op->struct_size >= sizeof(tf_op_desc) ? op_name(op->op) : "run"; },
            [&]() -> tf_status {
                if (device < 0 || device >= Impl::device_count())
                    return fail(err, TF_STATUS_INVALID_ARGUMENT, "run: no %s device %d (there are %d)", plugin_name(),
                                device, Impl::device_count());
                // run() only gets what supports() accepted, but a bad descriptor must never crash.
                const HostRow *row = nullptr;
                if (tf_status s = kernel_to_run(rows(), op, true, err, &row); s != TF_STATUS_OK) return s;
                return row->run(*op, err);
            });
    }
};

}  // namespace TF_KIT_HIDDEN
