// Stand-in for xeus-cling's <xcpp/xdisplay.hpp>, used only when
// notebooks-cpp/run_notebook.py compiles a notebook's cells with g++ (CI,
// where xeus-cling is not installed). Like the real one, display(x) asks
// mime_bundle_repr(x) (found by argument-dependent lookup) for a mime bundle;
// instead of sending it to Jupyter it prints the bundle on one marked line,
// which run_notebook.py turns into the cell's display_data output.
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
    std::cout << "\x1e" << "MWNB-DISPLAY " << bundle.dump() << "\n";
    std::cout.flush();
}

}  // namespace xcpp
