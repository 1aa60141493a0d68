// Reading the IDX files of (Fashion-)MNIST, gzip-compressed or not, with zlib.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fmnist {

// A missing, unreadable or malformed data file; what() names the file and the problem.
class DataError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// An IDX array of unsigned bytes (type code 0x08), row-major.
struct IdxArray {
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
};

// Reads path (gzip or plain). Throws DataError when the file is missing, the gzip stream is
// corrupt, the magic is not 0x0000 08 <rank>, the rank differs from expected_rank, the data is
// shorter than the dimensions say (truncated) or longer (trailing bytes).
IdxArray read_idx(const std::string &path, int expected_rank);

// One split of the dataset: count images of rows x cols bytes and their labels (0..9).
struct Split {
    int64_t count = 0, rows = 0, cols = 0;
    std::vector<uint8_t> images;
    std::vector<uint8_t> labels;
};

// Reads <dir>/<name>-images-idx3-ubyte.gz and <dir>/<name>-labels-idx1-ubyte.gz (name "train"
// or "t10k") and checks that the counts agree and every label is in 0..9.
Split read_split(const std::string &dir, const std::string &name);

// The directory Debian's dataset-fashion-mnist package installs.
inline const char *default_data_dir() { return "/usr/share/datasets/fashion-mnist"; }

}  // namespace fmnist
