// The text the model is trained on: the English fortune-cookie files of
// Debian's `fortunes` package (installed by scripts/install-deps.sh), read
// as bytes. Every regular file of the folder is taken, in name order, except
// the index files (*.dat), the *.u8 links and `ascii-art` (pictures, not
// prose). Each file is a list of quotations separated by lines holding a
// single "%"; quotation i (counted over all files) goes to validation when
// i % 20 == 19 (5%), to training otherwise. Both splits keep the "%"
// separators, so the model learns where a quotation ends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mw::model {

inline constexpr const char* kDefaultCorpusDir = "/usr/share/games/fortunes";

struct Corpus {
    std::string train, validation;
    std::vector<std::string> files;  // file names read, in order
    std::size_t quotations = 0;
};

// Throws std::runtime_error naming the folder (and how to install the
// package) when it is missing or holds no text.
Corpus load_corpus(const std::string& dir = kDefaultCorpusDir);

// Bytes as token ids 0..255.
inline std::vector<int> to_tokens(const std::string& s) {
    return std::vector<int>(reinterpret_cast<const unsigned char*>(s.data()),
                            reinterpret_cast<const unsigned char*>(s.data()) + s.size());
}

}  // namespace mw::model
