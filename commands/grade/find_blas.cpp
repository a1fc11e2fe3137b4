// The BLAS libraries a sandbox hides (commands/grade/sandbox.hpp): apart from
// the sandbox itself, so that tests call it without bubblewrap.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "commands/grade/sandbox.hpp"

namespace fs = std::filesystem;

namespace mw::grade {

void find_blas(const std::vector<std::string>& roots, std::vector<std::string>& dirs, std::vector<std::string>& files) {
    auto named = [](std::string n) {
        std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
        return n.find("blas") != std::string::npos || n.find("lapack") != std::string::npos ||
               n.find("atlas") != std::string::npos || n.rfind("libmkl", 0) == 0;
    };
    for (const std::string& root : roots) {
        std::error_code ec;
        fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
        for (; !ec && it != end; it.increment(ec)) {
            if (!named(it->path().filename().string())) continue;
            std::error_code e2;
            const bool dir = it->is_directory(e2);
            if (dir) it.disable_recursion_pending();  // hidden whole
            const std::string real = fs::canonical(it->path(), e2).string();
            if (e2) continue;
            if (dir) dirs.push_back(real);
            else if (fs::is_regular_file(real, e2)) files.push_back(real);
        }
    }
    for (auto* v : {&dirs, &files}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
    }
}

}  // namespace mw::grade
