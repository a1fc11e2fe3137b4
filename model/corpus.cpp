// Loading the training text (model/corpus.hpp).
#include "model/corpus.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mw::model {

Corpus load_corpus(const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw std::runtime_error("corpus folder " + dir +
                                 " not found: install Debian's `fortunes` package (scripts/install-deps.sh does)");
    std::vector<fs::path> paths;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (!e.is_regular_file() || e.is_symlink() || name.ends_with(".dat") || name.ends_with(".u8") ||
            name == "ascii-art")
            continue;
        paths.push_back(e.path());
    }
    std::sort(paths.begin(), paths.end());
    Corpus c;
    for (const auto& p : paths) {
        std::ifstream in(p, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        const std::string text = ss.str();
        c.files.push_back(p.filename().string());
        // Quotations end at a line that is exactly "%".
        std::size_t at = 0;
        while (at < text.size()) {
            std::size_t end = text.find("\n%\n", at);
            std::size_t next = end == std::string::npos ? text.size() : end + 3;
            std::string q = text.substr(at, (end == std::string::npos ? text.size() : end + 1) - at);
            at = next;
            if (q.find_first_not_of(" \t\n") == std::string::npos) continue;
            (c.quotations % 20 == 19 ? c.validation : c.train) += q + "%\n";
            ++c.quotations;
        }
    }
    if (c.train.empty() || c.validation.empty())
        throw std::runtime_error("corpus folder " + dir + " holds no fortune text (expected files of quotations separated by '%' lines)");
    return c;
}

}  // namespace mw::model
