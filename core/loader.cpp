#include "loader.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>

#include "build_facts.h"
#include "code_trust.hpp"
#include "errors.hpp"
#include "log.hpp"

namespace tinyfin::detail {

namespace {

std::string abi_text(uint32_t version) {
    return std::to_string(TF_ABI_MAJOR(version)) + "." + std::to_string(TF_ABI_MINOR(version));
}

std::string real_path(const std::string &path) {
    char buffer[PATH_MAX];
    return realpath(path.c_str(), buffer) ? std::string(buffer) : path;
}

std::string parent_dir(const std::string &path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

bool is_dir(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string &text, const char *suffix) {
    size_t n = std::strlen(suffix);
    return text.size() >= n && text.compare(text.size() - n, n, suffix) == 0;
}

// Directory of libtinyfin.so itself, found through one of its own symbols.
std::string core_library_dir() {
    Dl_info info;
    if (dladdr(reinterpret_cast<void *>(&load_plugins), &info) == 0 || !info.dli_fname) return {};
    return parent_dir(real_path(info.dli_fname));
}

void split_colon_list(const std::string &list, std::vector<std::string> &out) {
    size_t start = 0;
    while (start <= list.size()) {
        size_t end = list.find(':', start);
        if (end == std::string::npos) end = list.size();
        out.push_back(list.substr(start, end - start));
        start = end + 1;
    }
}

std::vector<SearchEntry> build_search_path() {
    std::vector<SearchEntry> path;
    std::vector<std::string> user;
    split_colon_list(env("TINYFIN_PLUGIN_PATH"), user);
    // "" is unset (tinyfin/env.h); "a::b", ":a" or "a:" have an empty entry.
    const bool set = !user.empty() && !(user.size() == 1 && user[0].empty());
    for (const std::string &entry : user) {
        // An empty entry means "current directory" to most colon lists; never here.
        if (entry.empty()) {
            if (set)
                log(TF_LOG_WARN, "TINYFIN_PLUGIN_PATH has an empty entry; ignored: the current "
                                 "directory is never searched");
            continue;
        }
        if (entry[0] != '/') {
            log(TF_LOG_WARN, "TINYFIN_PLUGIN_PATH entry '" + entry + "' ignored: plugin paths must be absolute");
            continue;
        }
        // /proc/self/cwd is the current directory by another name, /proc/self/fd/N whatever is
        // open: both depend on the process reading them, like a relative path.
        if (tf_common::starts_with_proc(entry)) {
            log(TF_LOG_WARN, "TINYFIN_PLUGIN_PATH entry '" + entry + "' ignored: plugin paths must not be under /proc");
            continue;
        }
        path.push_back({entry, "TINYFIN_PLUGIN_PATH"});
    }
    std::string lib_dir = core_library_dir();
    if (!lib_dir.empty()) {
        std::string installed = lib_dir + "/tinyfin/plugins";
        if (is_dir(installed)) path.push_back({installed, "install"});
    }
#ifdef TF_BUILD_CORE_DIR
    // Running from the build tree: also search the plugins built beside this library.
    if (!lib_dir.empty() && lib_dir == real_path(TF_BUILD_CORE_DIR)) {
        std::vector<std::string> dirs;
        split_colon_list(TF_BUILD_PLUGIN_DIRS, dirs);
        for (const std::string &dir : dirs)
            if (!dir.empty()) path.push_back({dir, "build-tree"});
    }
#endif
    return path;
}

// Candidate files of one search entry: the file itself, or a directory's *.so in name order.
std::vector<std::string> candidates_of(const SearchEntry &entry) {
    if (!is_dir(entry.path)) return {entry.path};
    std::vector<std::string> files;
    DIR *dir = opendir(entry.path.c_str());
    if (!dir) return files;
    while (dirent *item = readdir(dir)) {
        std::string name = item->d_name;
        if (name[0] == '.' || !ends_with(name, ".so")) continue;
        std::string full = entry.path + "/" + name;
        if (!is_dir(full)) files.push_back(full);
    }
    closedir(dir);
    std::sort(files.begin(), files.end());
    return files;
}

bool insecure_allowed() { return env_switch("TINYFIN_ALLOW_INSECURE_PLUGINS", false, "0 (the trust rules apply)"); }

struct LoadingOptions {
    std::mutex mutex;
    std::vector<std::string> only;
    std::vector<PluginVerdict> verdicts;
    bool used = false;
};

LoadingOptions &loading_options() {
    static LoadingOptions options;
    return options;
}

bool valid_backend_name(const char *name) {
    // strnlen: the text may belong to a plugin of another ABI major, unchecked so far.
    if (!name || !*name || strnlen(name, 33) > 32) return false;
    for (const char *p = name; *p; ++p)
        if (!std::islower((unsigned char)*p) && !std::isdigit((unsigned char)*p) && *p != '_' && *p != '-')
            return false;
    return true;
}

// Checks what the core needs from a table before trusting it; "" when fine.
std::string validate_table(const tf_plugin *table) {
    if (table->struct_size < plugin_table_size_1_0)
        return "plugin table is " + std::to_string(table->struct_size) + " bytes, ABI 1.0 needs at least " +
               std::to_string(plugin_table_size_1_0);
    if (!valid_backend_name(table->name)) return "plugin name must be 1-32 characters of [a-z0-9_-]";
    struct Required {
        const void *pointer;
        const char *member;
    };
    const Required required[] = {
        {(const void *)table->probe, "probe"},
        {(const void *)table->init, "init"},
        {(const void *)table->shutdown, "shutdown"},
        {(const void *)table->device_count, "device_count"},
        {(const void *)table->device_info, "device_info"},
        {(const void *)table->buffer_alloc, "buffer_alloc"},
        {(const void *)table->buffer_free, "buffer_free"},
        {(const void *)table->buffer_write, "buffer_write"},
        {(const void *)table->buffer_read, "buffer_read"},
        {(const void *)table->buffer_copy, "buffer_copy"},
        {(const void *)table->supports, "supports"},
        {(const void *)table->run, "run"},
        {(const void *)table->synchronize, "synchronize"},
    };
    for (const Required &r : required)
        if (!r.pointer) return std::string("required member ") + r.member + " is NULL";
    return {};
}

class Loader {
public:
    explicit Loader(const tf_host_api *host) : host_(host) {}

    LoadResult run() {
        LoadingOptions &options = loading_options();
        std::lock_guard lock(options.mutex);
        options.used = true;
        verdicts_ = options.verdicts;
        if (options.only.empty()) {
            result_.search_path = build_search_path();
        } else {
            for (const std::string &file : options.only) result_.search_path.push_back({file, "isolated"});
        }
        for (const SearchEntry &entry : result_.search_path)
            for (const std::string &file : candidates_of(entry)) load_one(file);
        return std::move(result_);
    }

private:
    void load_one(const std::string &file) {
        PluginRecord record;
        record.path = file;
        record.resolved_path = real_path(file);
        reject_or_load(record);
        if (record.outcome == "loaded")
            log_from(TF_LOG_DEBUG, record.name, "loaded from " + record.path);
        else
            log_from(TF_LOG_INFO, "loader", record.path + ": " + record.outcome + ": " + record.message);
        result_.records.push_back(std::move(record));
    }

    void reject_or_load(PluginRecord &record) {
        for (const PluginVerdict &verdict : verdicts_) {
            if (verdict.path != record.path) continue;
            record.outcome = verdict.outcome;
            record.message = verdict.message;
            return;
        }
        std::string why;
        switch (tf_common::check_code_file(record.path, record.resolved_path, why)) {
        case tf_common::CodeVerdict::trusted: break;
        case tf_common::CodeVerdict::not_a_file:
            // Never overridable: dlopen of a FIFO blocks forever, of a device reads it.
            record.outcome = "not-a-file";
            record.message = why;
            return;
        case tf_common::CodeVerdict::untrusted:
            if (!insecure_allowed()) {
                record.outcome = "insecure";
                record.message = why + ", or set TINYFIN_ALLOW_INSECURE_PLUGINS=1 to load it anyway";
                return;
            }
            log_from(TF_LOG_WARN, "loader",
                     record.path + ": loading despite: " + why + " (TINYFIN_ALLOW_INSECURE_PLUGINS)");
        }
        dlerror();
        DlHandle handle(dlopen(record.path.c_str(), RTLD_NOW | RTLD_LOCAL));
        if (!handle) {
            const char *text = dlerror();
            record.outcome = "dlopen-failed";
            record.message = text ? text : "dlopen failed";
            return;
        }
        // From here on the library's code may be running (a constructor, a thread its entry or
        // probe started): a refused plugin stays mapped for the life of the process rather than
        // be unmapped under that code. Only a loaded plugin, whose shutdown has run, is closed.
        struct KeepMapped {
            DlHandle &handle;
            std::vector<void *> &kept;
            ~KeepMapped() {
                if (handle) kept.push_back(handle.release());
            }
        } keep{handle, result_.kept_mapped};
        auto entry = reinterpret_cast<tf_plugin_entry_fn>(dlsym(handle.get(), TF_PLUGIN_ENTRY_NAME));
        if (!entry) {
            record.outcome = "no-entry-symbol";
            record.message = std::string("no symbol ") + TF_PLUGIN_ENTRY_NAME + ": not a tinyfin plugin";
            return;
        }
        const tf_plugin *table = nullptr;
        try {
            table = entry(host_);
        } catch (...) {
            record.outcome = "entry-refused";
            record.message = escaped_exception(TF_PLUGIN_ENTRY_NAME);
            return;
        }
        if (!table) {
            record.outcome = "entry-refused";
            record.message = std::string(TF_PLUGIN_ENTRY_NAME) +
                             " returned NULL: the plugin cannot work with core ABI " + abi_text(TF_ABI_VERSION);
            return;
        }
        record.abi_version = table->abi_version;
        if (TF_ABI_MAJOR(table->abi_version) != TF_ABI_VERSION_MAJOR) {
            record.outcome = "abi-mismatch";
            record.message = "plugin ABI " + abi_text(table->abi_version) + ", core ABI " + abi_text(TF_ABI_VERSION) +
                             ": rebuild the plugin against this tinyfin";
            // `name` keeps its 1.0 offset in every major (plugin-abi.md), so TINYFIN_BACKEND
            // warnings can say which plugin needs rebuilding.
            if (table->struct_size >= offsetof(tf_plugin, name) + sizeof table->name && valid_backend_name(table->name))
                record.name = table->name;
            // Nothing past abi_version has a known layout in another major version.
            return;
        }
        if (std::string why = validate_table(table); !why.empty()) {
            record.outcome = "invalid-table";
            record.message = why;
            return;
        }
        record.name = table->name;
        record.version = table->version ? table->version : "";
        record.priority = table->priority;
        for (const auto &backend : result_.backends) {
            if (backend->name() == record.name) {
                record.outcome = "shadowed";
                record.message = "a plugin named '" + record.name + "' was already loaded from " + backend->path();
                return;
            }
        }
        if (result_.backends.size() >= static_cast<size_t>(max_backends)) {
            record.outcome = "invalid-table";
            record.message = "too many plugins loaded (limit " + std::to_string(max_backends) + ")";
            return;
        }
        tf_error err = make_error();
        tf_status probed = TF_STATUS_INTERNAL;
        try {
            probed = table->probe(&err);
        } catch (...) {
            record.outcome = "probe-refused";
            record.message = escaped_exception("probe");
            return;
        }
        if (probed != TF_STATUS_OK) {
            record.outcome = "probe-refused";
            record.message = error_text(err, "probe failed without a reason");
            return;
        }
        record.outcome = "loaded";
        auto backend =
            std::make_unique<Backend>(std::move(handle), table, record.path, static_cast<int>(result_.backends.size()));
        record.backend = backend.get();
        result_.backends.push_back(std::move(backend));
    }

    const tf_host_api *host_;
    std::vector<PluginVerdict> verdicts_;
    LoadResult result_;
};

}  // namespace

void configure_loading(std::vector<std::string> only, std::vector<PluginVerdict> verdicts) {
    LoadingOptions &options = loading_options();
    std::lock_guard lock(options.mutex);
    if (options.used) raise<BackendError>("plugin loading can only be configured before the first tinyfin call");
    options.only = std::move(only);
    options.verdicts = std::move(verdicts);
}

std::vector<std::string> candidate_files() {
    std::vector<std::string> files;
    for (const SearchEntry &entry : build_search_path())
        for (std::string &file : candidates_of(entry)) files.push_back(std::move(file));
    return files;
}

void pin_listed_libraries() {
    if (!keep_plugins_mapped()) return;
    std::vector<std::string> names;
    split_colon_list(env("TINYFIN_PIN_LIBRARIES"), names);
    for (const std::string &name : names) {
        if (name.empty()) continue;
        // A bare soname is found by the dynamic linker's own search (as the program's libraries
        // are); a path is code named by the environment and passes the plugin trust rules.
        if (name.find('/') != std::string::npos) {
            std::string resolved, why;
            tf_common::CodeVerdict verdict =
                tf_common::check_code_file(name, resolved, why, "TINYFIN_PIN_LIBRARIES file");
            if (verdict == tf_common::CodeVerdict::not_a_file ||
                (verdict == tf_common::CodeVerdict::untrusted && !insecure_allowed())) {
                log_from(TF_LOG_WARN, "core", "TINYFIN_PIN_LIBRARIES: " + name + " not loaded: " + why);
                continue;
            }
        }
        // RTLD_NODELETE: a plugin's later dlopen of the same file gets this copy, and no dlclose
        // can unmap it.
        if (void *h = dlopen(name.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE)) {
            dlclose(h);
        } else {
            const char *why = dlerror();
            log_from(TF_LOG_WARN, "core", "TINYFIN_PIN_LIBRARIES: " + std::string(why ? why : name));
        }
    }
}

LoadResult load_plugins(const tf_host_api *host) {
    pin_listed_libraries();
    return Loader(host).run();
}

}  // namespace tinyfin::detail
