# Roofline of precision/gemv_q (cpu, b=1,n_in=18432,n_out=18432), written by `memwall plot`.
# Redraw with: gnuplot roofline-precision-gemv_q-cpu.gp
set terminal svg size 1280,800 dynamic noenhanced font 'Sans,13' background '#ffffff'
set output 'roofline-precision-gemv_q-cpu.svg'
set title "Roofline: precision / gemv_q   (cpu, b=1,n_in=18432,n_out=18432, fp32)\nIntel(R) Xeon(R) Processor  |  roofs: measured (measured)"
set xlabel 'arithmetic intensity (FLOP/byte)'
set ylabel 'performance (GFLOP/s)'
set logscale xy
set xrange [0.01:100]
set yrange [1:1000]
set format x '%g'
set format y '%g'
set mxtics 10
set mytics 10
set grid xtics ytics mxtics mytics lc rgb '#e5e5e5' lw 1, lc rgb '#f3f3f3' lw 1
set style textbox opaque noborder margins 0.5,0.3
set key outside right top vertical Left reverse noopaque spacing 1.3 samplen 2.5 box lc rgb '#bbbbbb'
set rmargin at screen 0.64
set lmargin at screen 0.08
set tmargin at screen 0.88
set bmargin at screen 0.10
set label 1 "0: naive" at 0.629394,2.26715 left boxed front tc rgb '#7f7f7f'
set label 2 "1: fp32" at 0.629394,12.8141 left boxed front tc rgb '#2ca02c'
set label 3 "2: bf16" at 1.25865,22.4231 left boxed front tc rgb '#9467bd'
set label 4 "2: fp16" at 1.25865,23.8728 left boxed front tc rgb '#8c564b'
set label 5 "3: int8_channel" at 2.51621,40.052 left boxed front tc rgb '#e377c2'
set label 6 "4: int4_g128_asym" at 4.73561,54.9117 left boxed front tc rgb '#17becf'
set label 7 "4: int4_g128_sym" at 4.879,51.8222 left boxed front tc rgb '#bcbd22'
set label 8 "4: int4_g32_asym" at 4.02577,29.1241 left boxed front tc rgb '#d62728'
set label 9 "4: int4_g32_sym" at 4.47273,35.2649 left boxed front tc rgb '#393b79'
set label 10 "4: int4_g64_asym" at 4.47273,39.1697 left boxed front tc rgb '#1f77b4'
set label 11 "4: int4_g64_sym" at 4.73561,49.1406 left boxed front tc rgb '#2ca02c'
set arrow from 0.499946,2.26715 to 3.5034,49.0779 head filled size screen 0.014,20 lw 2.5 lc rgb '#d62728' front
set label 12 "24.2x" at 1.37135,11.1577 right offset char -0.8,0 front tc rgb '#d62728' font ',14'
plot 'roofline-precision-gemv_q-cpu.roofs.dat' index 0 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "fp32 FMA peak 328 GFLOP/s (2 threads)", \
     'roofline-precision-gemv_q-cpu.roofs.dat' index 1 using 1:2 with lines lw 1.5 lc rgb '#9ecae1' title "L1 662 GB/s", \
     'roofline-precision-gemv_q-cpu.roofs.dat' index 2 using 1:2 with lines lw 1.5 lc rgb '#6baed6' title "L2 167 GB/s", \
     'roofline-precision-gemv_q-cpu.roofs.dat' index 3 using 1:2 with lines lw 1.5 lc rgb '#3182bd' title "L3 84.2 GB/s", \
     'roofline-precision-gemv_q-cpu.roofs.dat' index 4 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "DRAM triad 22.1 GB/s (2 threads)", \
     'roofline-precision-gemv_q-cpu.points.dat' index 0 using 1:2 with points pt 5 ps 2 lc rgb '#7f7f7f' title "0: naive  2.27 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 1 using 1:2 with points pt 7 ps 2 lc rgb '#2ca02c' title "1: fp32  12.8 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 2 using 1:2 with points pt 7 ps 2 lc rgb '#9467bd' title "2: bf16  22.4 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 3 using 1:2 with points pt 7 ps 2 lc rgb '#8c564b' title "2: fp16  23.9 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 4 using 1:2 with points pt 7 ps 2 lc rgb '#e377c2' title "3: int8_channel  40.1 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 5 using 1:2 with points pt 7 ps 2 lc rgb '#17becf' title "4: int4_g128_asym  54.9 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 6 using 1:2 with points pt 7 ps 2 lc rgb '#bcbd22' title "4: int4_g128_sym  51.8 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 7 using 1:2 with points pt 7 ps 2 lc rgb '#d62728' title "4: int4_g32_asym  29.1 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 8 using 1:2 with points pt 7 ps 2 lc rgb '#393b79' title "4: int4_g32_sym  35.3 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 9 using 1:2 with points pt 7 ps 2 lc rgb '#1f77b4' title "4: int4_g64_asym  39.2 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 10 using 1:2 with points pt 7 ps 2 lc rgb '#2ca02c' title "4: int4_g64_sym  49.1 GFLOP/s"
set terminal pngcairo size 1280,800 noenhanced font 'Sans,11'
set output 'roofline-precision-gemv_q-cpu.png'
replot
unset output
