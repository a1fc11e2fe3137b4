extern "C" void student_transpose(const float* in, float* out, int rows, int cols) {
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j) out[j * rows + i] = in[i * cols + j]   // missing semicolon
}
