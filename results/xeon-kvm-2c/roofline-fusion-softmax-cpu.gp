# Roofline of fusion/softmax (cpu, cols=8192,rows=32768), written by `memwall plot`.
# Redraw with: gnuplot roofline-fusion-softmax-cpu.gp
set terminal svg size 1280,800 dynamic noenhanced font 'Sans,13' background '#ffffff'
set output 'roofline-fusion-softmax-cpu.svg'
set title "Roofline: fusion / softmax   (cpu, cols=8192,rows=32768, fp32)\nIntel(R) Xeon(R) Processor  |  roofs: measured (measured)"
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
set label 1 "0: three_pass" at 1.10156,21.3796 left boxed front tc rgb '#7f7f7f'
set label 2 "1: online" at 1.46875,27.6529 left boxed front tc rgb '#2ca02c'
set label 3 "2: row_fused" at 2.20312,36.3187 left boxed front tc rgb '#9467bd'
set arrow from 0.875,21.3796 to 1.59819,33.8846 head filled size screen 0.014,20 lw 2.5 lc rgb '#d62728' front
set label 4 "1.70x" at 1.23744,27.8654 right offset char -0.8,0 front tc rgb '#d62728' font ',14'
plot 'roofline-fusion-softmax-cpu.roofs.dat' index 0 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "fp32 FMA peak 328 GFLOP/s (2 threads)", \
     'roofline-fusion-softmax-cpu.roofs.dat' index 1 using 1:2 with lines lw 1.5 lc rgb '#9ecae1' title "L1 662 GB/s", \
     'roofline-fusion-softmax-cpu.roofs.dat' index 2 using 1:2 with lines lw 1.5 lc rgb '#6baed6' title "L2 167 GB/s", \
     'roofline-fusion-softmax-cpu.roofs.dat' index 3 using 1:2 with lines lw 1.5 lc rgb '#3182bd' title "L3 84.2 GB/s", \
     'roofline-fusion-softmax-cpu.roofs.dat' index 4 using 1:2 with lines lw 3 lc rgb '#1a1a1a' title "DRAM triad 22.1 GB/s (2 threads)", \
     'roofline-fusion-softmax-cpu.points.dat' index 0 using 1:2 with points pt 5 ps 2 lc rgb '#7f7f7f' title "0: three_pass  21.4 GFLOP/s", \
     'roofline-fusion-softmax-cpu.points.dat' index 1 using 1:2 with points pt 7 ps 2 lc rgb '#2ca02c' title "1: online  27.7 GFLOP/s", \
     'roofline-fusion-softmax-cpu.points.dat' index 2 using 1:2 with points pt 7 ps 2 lc rgb '#9467bd' title "2: row_fused  36.3 GFLOP/s"
set terminal pngcairo size 1280,800 noenhanced font 'Sans,11'
set output 'roofline-fusion-softmax-cpu.png'
replot
unset output
