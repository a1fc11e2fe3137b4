# Roofline of precision/gemv_q (cpu, b=1,n_in=8192,n_out=8192), written by `memwall plot`.
# Redraw with: gnuplot roofline-precision-gemv_q-cpu.gp
set terminal svg size 1280,800 dynamic noenhanced font 'Sans,13' background '#ffffff'
set output 'roofline-precision-gemv_q-cpu.svg'
set title "Roofline: precision / gemv_q   (cpu, b=1,n_in=8192,n_out=8192, fp32)\nIntel(R) Xeon(R) Processor  |  roofs: measured (measured)"
set xlabel 'arithmetic intensity (FLOP/byte)'
set ylabel 'performance (GFLOP/s)'
set logscale xy
set xrange [0.01:100]
set yrange [0.1:1000]
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
set label 1 "0: naive" at 0.629309,1.7338 left boxed front tc rgb '#7f7f7f'
set label 2 "1: fp32" at 0.629309,9.09353 left boxed front tc rgb '#2ca02c'
set label 3 "2: bf16" at 1.25831,16.3801 left boxed front tc rgb '#9467bd'
set label 4 "2: fp16" at 1.25831,14.8419 left boxed front tc rgb '#8c564b'
set label 5 "3: int8_channel" at 2.51417,36.7131 left boxed front tc rgb '#e377c2'
set label 6 "4: int4_g128_asym" at 4.73079,33.2563 left boxed front tc rgb '#17becf'
set label 7 "4: int4_g128_sym" at 4.87387,34.6192 left boxed front tc rgb '#bcbd22'
set label 8 "4: int4_g32_asym" at 4.02228,22.7221 left boxed front tc rgb '#d62728'
set label 9 "4: int4_g32_sym" at 4.46842,18.9098 left boxed front tc rgb '#393b79'
set label 10 "4: int4_g64_asym" at 4.46842,33.8445 left boxed front tc rgb '#1f77b4'
set label 11 "4: int4_g64_sym" at 4.73079,36.2454 left boxed front tc rgb '#2ca02c'
set arrow from 0.499878,1.7338 to 1.86486,31.5685 head filled size screen 0.014,20 lw 2.5 lc rgb '#d62728' front
set label 12 "21.2x" at 0.999146,7.97829 right offset char -0.8,0 front tc rgb '#d62728' font ',14'
plot 'roofline-precision-gemv_q-cpu.roofs.dat' index 0 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "fp32 FMA peak 328 GFLOP/s (2 threads)", \
     'roofline-precision-gemv_q-cpu.roofs.dat' index 1 using 1:2 with lines lw 1.5 lc rgb '#9ecae1' title "L1 662 GB/s", \
     'roofline-precision-gemv_q-cpu.roofs.dat' index 2 using 1:2 with lines lw 1.5 lc rgb '#6baed6' title "L2 167 GB/s", \
     'roofline-precision-gemv_q-cpu.roofs.dat' index 3 using 1:2 with lines lw 1.5 lc rgb '#3182bd' title "L3 84.2 GB/s", \
     'roofline-precision-gemv_q-cpu.roofs.dat' index 4 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "DRAM triad 22.1 GB/s (2 threads)", \
     'roofline-precision-gemv_q-cpu.points.dat' index 0 using 1:2 with points pt 5 ps 2 lc rgb '#7f7f7f' title "0: naive  1.73 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 1 using 1:2 with points pt 7 ps 2 lc rgb '#2ca02c' title "1: fp32  9.09 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 2 using 1:2 with points pt 7 ps 2 lc rgb '#9467bd' title "2: bf16  16.4 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 3 using 1:2 with points pt 7 ps 2 lc rgb '#8c564b' title "2: fp16  14.8 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 4 using 1:2 with points pt 7 ps 2 lc rgb '#e377c2' title "3: int8_channel  36.7 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 5 using 1:2 with points pt 7 ps 2 lc rgb '#17becf' title "4: int4_g128_asym  33.3 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 6 using 1:2 with points pt 7 ps 2 lc rgb '#bcbd22' title "4: int4_g128_sym  34.6 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 7 using 1:2 with points pt 7 ps 2 lc rgb '#d62728' title "4: int4_g32_asym  22.7 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 8 using 1:2 with points pt 7 ps 2 lc rgb '#393b79' title "4: int4_g32_sym  18.9 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 9 using 1:2 with points pt 7 ps 2 lc rgb '#1f77b4' title "4: int4_g64_asym  33.8 GFLOP/s", \
     'roofline-precision-gemv_q-cpu.points.dat' index 10 using 1:2 with points pt 7 ps 2 lc rgb '#2ca02c' title "4: int4_g64_sym  36.2 GFLOP/s"
set terminal pngcairo size 1280,800 noenhanced font 'Sans,11'
set output 'roofline-precision-gemv_q-cpu.png'
replot
unset output
