// `memwall course` and its subcommands (course.hpp).
#include <CLI/CLI.hpp>

#include "commands/course/course.hpp"
#include "harness/command.hpp"

MW_REGISTER_COMMAND(course, [](CLI::App& app) -> mw::CommandAction {
    auto* sub = app.add_subcommand("course", "The instructor's kit: student handouts, copy detection, grading a class");
    sub->require_subcommand(1);
    auto* handout = sub->add_subcommand(
        "handout", "Write a student's folder for one level (stubs, lesson, notebook, practice grader), proven "
                   "free of the level's solutions and rungs");
    auto h = std::make_shared<mw::course::HandoutOptions>();
    handout->add_option("level", h->level, "Level: 01-vectorization, 01 or vectorization")->required();
    handout->add_option("--out", h->out, "The folder to create (must not exist)")->required();
    auto* similarity = sub->add_subcommand(
        "similarity", "Find copies among submissions and of the project's own solutions (winnowed token "
                      "fingerprints, blind to names, layout and comments)");
    auto s = std::make_shared<mw::course::SimilarityOptions>();
    similarity->add_option("submissions", s->inputs, "Source files, or folders of them (one file per student)")
        ->required();
    similarity->add_option("--level", s->level,
                           "The level they answer: its stubs are discounted, its solutions and rungs compared");
    similarity->add_option("--format", s->format, "text or json")->default_val("text");
    similarity->add_option("--out", s->out, "Write the report here (atomically) instead of standard output");
    auto* grade_all = sub->add_subcommand(
        "grade-all", "Grade every submission in a folder (resumable), then write a table, the copies found and a "
                     "page with the distribution and a leaderboard");
    auto g = std::make_shared<mw::course::GradeAllOptions>();
    grade_all->add_option("level", g->level, "Level: 01-vectorization, 01 or vectorization")->required();
    grade_all->add_option("submissions", g->dir, "A folder: one source file, or one folder, per student")->required();
    grade_all->add_option("--out", g->out, "The class's folder: grades/, scores.csv, summary.json, index.html")
        ->required();
    grade_all->add_option("--seed", g->seed_text, "Public seed for every grade (default: memwall grade's)");
    grade_all->add_option("--secret-seed-file", g->secret_seed_file, "Instructor's secret seed (see memwall grade)");
    grade_all->add_option("--exercise", g->exercise, "Exercise id (see memwall grade)");
    grade_all->add_option("--backend", g->backend, "cpu, cuda or cuda-emu (see memwall grade)");
    grade_all->add_option("--threads", g->threads, "CPU threads (see memwall grade)");
    auto* autograder = sub->add_subcommand(
        "autograder", "Write a Gradescope autograder zip for one level (setup.sh builds the grader from source on "
                      "the platform's image; run_autograder grades with the zip's secret seed)");
    auto a = std::make_shared<mw::course::AutograderOptions>();
    autograder->add_option("level", a->level, "Level: 01-vectorization, 01 or vectorization")->required();
    autograder->add_option("--out", a->out, "The zip to write (replaced atomically if it exists)")->required();
    autograder->add_option("--exercise", a->exercise, "Grade only this exercise of the level (default: any)");
    autograder->add_option("--secret-seed-file", a->secret_seed_file,
                           "The secret the zip grades with (default: MEMWALL_GRADE_SECRET, else a new random one)");
    return [=]() -> int {
        if (*autograder) return mw::course::run_autograder_zip(*a);
        if (*handout) return mw::course::run_handout(*h);
        if (*grade_all) return mw::course::run_grade_all(*g);
        return mw::course::run_similarity(*s);
    };
});
