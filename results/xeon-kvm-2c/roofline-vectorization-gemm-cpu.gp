# Roofline of vectorization/gemm (cpu, k=1024,m=1024,n=1024), written by `memwall plot`.
# Redraw with: gnuplot roofline-vectorization-gemm-cpu.gp
set terminal svg size 1280,800 dynamic noenhanced font 'Sans,13' background '#ffffff'
set output 'roofline-vectorization-gemm-cpu.svg'
set title "Roofline: vectorization / gemm   (cpu, k=1024,m=1024,n=1024, fp32)\nIntel(R) Xeon(R) Processor  |  roofs: measured (measured)"
set xlabel 'arithmetic intensity (FLOP/byte)'
set ylabel 'performance (GFLOP/s)'
set logscale xy
set xrange [0.01:1000]
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
set label 1 "0: naive" at 0.665461,0.43114 left boxed front tc rgb '#7f7f7f'
set label 2 "1: loop_order" at 0.665461,7.79508 left boxed front tc rgb '#2ca02c'
set label 3 "2: blocked" at 19.5075,8.21587 left boxed front tc rgb '#9467bd'
set label 4 "3: simd" at 52.5202,115.839 left boxed front tc rgb '#8c564b'
set label 5 "4: threads" at 52.5202,178.239 left boxed front tc rgb '#e377c2'
set label 6 "openblas (vendor)" at 63.991,196.253 right boxed front tc rgb '#ff7f0e'
set arrow from 0.499025,0.43114 to 35.4949,154.427 head filled size screen 0.014,20 lw 2.5 lc rgb '#d62728' front
set label 7 "413x" at 4.43327,8.76618 right offset char -0.8,0 front tc rgb '#d62728' font ',14'
plot 'roofline-vectorization-gemm-cpu.roofs.dat' index 0 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "fp32 FMA peak 328 GFLOP/s (2 threads)", \
     'roofline-vectorization-gemm-cpu.roofs.dat' index 1 using 1:2 with lines lw 1.5 lc rgb '#9ecae1' title "L1 662 GB/s", \
     'roofline-vectorization-gemm-cpu.roofs.dat' index 2 using 1:2 with lines lw 1.5 lc rgb '#6baed6' title "L2 167 GB/s", \
     'roofline-vectorization-gemm-cpu.roofs.dat' index 3 using 1:2 with lines lw 1.5 lc rgb '#3182bd' title "L3 84.2 GB/s", \
     'roofline-vectorization-gemm-cpu.roofs.dat' index 4 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "DRAM triad 22.1 GB/s (2 threads)", \
     'roofline-vectorization-gemm-cpu.points.dat' index 0 using 1:2 with points pt 5 ps 2 lc rgb '#7f7f7f' title "0: naive  0.43 GFLOP/s", \
     'roofline-vectorization-gemm-cpu.points.dat' index 1 using 1:2 with points pt 7 ps 2 lc rgb '#2ca02c' title "1: loop_order  7.80 GFLOP/s", \
     'roofline-vectorization-gemm-cpu.points.dat' index 2 using 1:2 with points pt 7 ps 2 lc rgb '#9467bd' title "2: blocked  8.22 GFLOP/s", \
     'roofline-vectorization-gemm-cpu.points.dat' index 3 using 1:2 with points pt 7 ps 2 lc rgb '#8c564b' title "3: simd  116 GFLOP/s", \
     'roofline-vectorization-gemm-cpu.points.dat' index 4 using 1:2 with points pt 7 ps 2 lc rgb '#e377c2' title "4: threads  178 GFLOP/s", \
     'roofline-vectorization-gemm-cpu.points.dat' index 5 using 1:2 with points pt 9 ps 2 lc rgb '#ff7f0e' title "openblas (vendor)  196 GFLOP/s"
set terminal pngcairo size 1280,800 noenhanced font 'Sans,11'
set output 'roofline-vectorization-gemm-cpu.png'
replot
unset output
