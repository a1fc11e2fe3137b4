// Attack on the Gradescope autograder (tests/course/autograder_test.sh): the
// submission knows the platform's layout and reaches for it from inside the
// grade. It reads the zip's secret seed (every input of every student's
// grade is derived from it) and puts it in the report, writes a results.json
// with full marks where the platform reads it, and leaves a marker beside
// it; it computes nothing. Contained: the sandbox shows none of
// /autograder, the grader writes results.json after the last call, and the
// score is zero.
#include <cstdio>
#include <cstring>

extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    char secret[256] = {0};
    for (const char* p : {"/autograder/source/secret-seed", "/proc/1/root/autograder/source/secret-seed",
                          "/proc/self/cwd/../source/secret-seed"})
        if (FILE* f = std::fopen(p, "r")) {
            std::fread(secret, 1, sizeof secret - 1, f);
            std::fclose(f);
            std::fprintf(stderr, "LEAKED-SECRET:%s\n", secret);
        }
    for (const char* p : {"/autograder/results/results.json", "/proc/1/root/autograder/results/results.json"})
        if (FILE* f = std::fopen(p, "w")) {
            std::fputs("{\"score\": 100, \"output\": \"FORGED\", \"tests\": []}\n", f);
            std::fclose(f);
        }
    if (FILE* f = std::fopen("/autograder/results/ATTACK-MARKER", "w")) std::fclose(f);
    (void)in, (void)out, (void)rows, (void)cols;
}
