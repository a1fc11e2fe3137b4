// Stand-in for xeus-cling's <xcpp/xdisplay.hpp>, for the two ways these
// notebooks run without xeus-cling. Like the real one, display(x) asks
// mime_bundle_repr(x) (found by argument-dependent lookup) for a mime bundle.
//   * notebooks-cpp/run_notebook.py compiles with -DMWNB_DISPLAY_MARKERS: the
//     bundle goes on one marked line, which the script turns into the cell's
//     display_data output (an image in the notebook).
//   * The clang_repl kernel (clang-repl.toml puts this folder on its include
//     path) shows text only: display prints the bundle's text/plain, which
//     names the image file.
#pragma once

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

namespace xcpp {

template <class T>
void display(const T& x) {
    const nlohmann::json bundle = mime_bundle_repr(x);
    std::cout.flush();
    std::fflush(stdout);
#ifdef MWNB_DISPLAY_MARKERS
    std::cout << "\x1e" << "MWNB-DISPLAY " << bundle.dump() << "\n";
#else
    std::cout << bundle.value("text/plain", std::string("<display>")) << "\n";
#endif
    std::cout.flush();
}

}  // namespace xcpp
