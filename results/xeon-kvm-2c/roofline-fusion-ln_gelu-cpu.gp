# Roofline of fusion/ln_gelu (cpu, k=1024,m=4096,n=1024), written by `memwall plot`.
# Redraw with: gnuplot roofline-fusion-ln_gelu-cpu.gp
set terminal svg size 1280,800 dynamic noenhanced font 'Sans,13' background '#ffffff'
set output 'roofline-fusion-ln_gelu-cpu.svg'
set title "Roofline: fusion / ln_gelu   (cpu, k=1024,m=4096,n=1024, fp32)\nIntel(R) Xeon(R) Processor  |  roofs: measured (measured)"
set xlabel 'arithmetic intensity (FLOP/byte)'
set ylabel 'performance (GFLOP/s)'
set logscale xy
set xrange [0.01:100]
set yrange [10:1000]
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
set label 1 "0: unfused" at 19.7625,159.851 right boxed front tc rgb '#7f7f7f'
set label 2 "1: fused_epilogue" at 32.1607,203.402 right boxed front tc rgb '#2ca02c'
set arrow from 24.8795,159.851 to 35.9872,191.882 head filled size screen 0.014,20 lw 2.5 lc rgb '#d62728' front
set label 3 "1.27x" at 31.7383,180.316 left offset char 0.8,0 front tc rgb '#d62728' font ',14'
plot 'roofline-fusion-ln_gelu-cpu.roofs.dat' index 0 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "fp32 FMA peak 328 GFLOP/s (2 threads)", \
     'roofline-fusion-ln_gelu-cpu.roofs.dat' index 1 using 1:2 with lines lw 1.5 lc rgb '#9ecae1' title "L1 662 GB/s", \
     'roofline-fusion-ln_gelu-cpu.roofs.dat' index 2 using 1:2 with lines lw 1.5 lc rgb '#6baed6' title "L2 167 GB/s", \
     'roofline-fusion-ln_gelu-cpu.roofs.dat' index 3 using 1:2 with lines lw 1.5 lc rgb '#3182bd' title "L3 84.2 GB/s", \
     'roofline-fusion-ln_gelu-cpu.roofs.dat' index 4 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "DRAM triad 22.1 GB/s (2 threads)", \
     'roofline-fusion-ln_gelu-cpu.points.dat' index 0 using 1:2 with points pt 5 ps 2 lc rgb '#7f7f7f' title "0: unfused  160 GFLOP/s", \
     'roofline-fusion-ln_gelu-cpu.points.dat' index 1 using 1:2 with points pt 7 ps 2 lc rgb '#2ca02c' title "1: fused_epilogue  203 GFLOP/s"
set terminal pngcairo size 1280,800 noenhanced font 'Sans,11'
set output 'roofline-fusion-ln_gelu-cpu.png'
replot
unset output
