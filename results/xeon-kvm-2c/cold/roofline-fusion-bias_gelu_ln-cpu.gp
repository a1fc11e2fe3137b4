# Roofline of fusion/bias_gelu_ln (cpu, hidden=4096,rows=2048), written by `memwall plot`.
# Redraw with: gnuplot roofline-fusion-bias_gelu_ln-cpu.gp
set terminal svg size 1280,800 dynamic noenhanced font 'Sans,13' background '#ffffff'
set output 'roofline-fusion-bias_gelu_ln-cpu.svg'
set title "Roofline: fusion / bias_gelu_ln   (cpu, hidden=4096,rows=2048, fp32)\nIntel(R) Xeon(R) Processor  |  roofs: measured (measured)"
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
set label 1 "0: naive" at 0.668682,0.800513 left boxed front tc rgb '#7f7f7f'
set label 2 "1: simd_passes" at 0.668682,12.6265 left boxed front tc rgb '#2ca02c'
set label 3 "2: fused" at 2.67326,38.8483 left boxed front tc rgb '#9467bd'
set arrow from 0.531153,0.800513 to 2.00834,33.2325 head filled size screen 0.014,20 lw 2.5 lc rgb '#d62728' front
set label 4 "48.5x" at 1.06201,5.57661 right offset char -0.8,0 front tc rgb '#d62728' font ',14'
plot 'roofline-fusion-bias_gelu_ln-cpu.roofs.dat' index 0 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "fp32 FMA peak 328 GFLOP/s (2 threads)", \
     'roofline-fusion-bias_gelu_ln-cpu.roofs.dat' index 1 using 1:2 with lines lw 1.5 lc rgb '#9ecae1' title "L1 662 GB/s", \
     'roofline-fusion-bias_gelu_ln-cpu.roofs.dat' index 2 using 1:2 with lines lw 1.5 lc rgb '#6baed6' title "L2 167 GB/s", \
     'roofline-fusion-bias_gelu_ln-cpu.roofs.dat' index 3 using 1:2 with lines lw 1.5 lc rgb '#3182bd' title "L3 84.2 GB/s", \
     'roofline-fusion-bias_gelu_ln-cpu.roofs.dat' index 4 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "DRAM triad 22.1 GB/s (2 threads)", \
     'roofline-fusion-bias_gelu_ln-cpu.points.dat' index 0 using 1:2 with points pt 5 ps 2 lc rgb '#7f7f7f' title "0: naive  0.80 GFLOP/s", \
     'roofline-fusion-bias_gelu_ln-cpu.points.dat' index 1 using 1:2 with points pt 7 ps 2 lc rgb '#2ca02c' title "1: simd_passes  12.6 GFLOP/s", \
     'roofline-fusion-bias_gelu_ln-cpu.points.dat' index 2 using 1:2 with points pt 7 ps 2 lc rgb '#9467bd' title "2: fused  38.8 GFLOP/s"
set terminal pngcairo size 1280,800 noenhanced font 'Sans,11'
set output 'roofline-fusion-bias_gelu_ln-cpu.png'
replot
unset output
