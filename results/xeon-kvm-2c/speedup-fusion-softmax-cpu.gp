# Speedups of fusion/softmax (cpu, cols=8192,rows=32768) over the naive rung, written by `memwall plot`.
# Redraw with: gnuplot speedup-fusion-softmax-cpu.gp
set terminal svg size 1280,800 dynamic noenhanced font 'Sans,13' background '#ffffff'
set output 'speedup-fusion-softmax-cpu.svg'
set title "Speedup over naive: fusion / softmax   (cpu, cols=8192,rows=32768)\nIntel(R) Xeon(R) Processor  |  from best-of-N times measured in the same run"
set ylabel 'speedup over the naive rung (x)'
set xlabel 'variant (rung: name)'
set xrange [-0.6:2.6]
set format y '%gx'
set yrange [0:2.0385]
set grid ytics lc rgb '#e5e5e5'
set xtics rotate by 25 right nomirror
set key off
set style fill solid 0.9 border lc rgb '#333333'
set bmargin 9
set rmargin 4
set lmargin 12
set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 1.5 dt 2 lc rgb '#555555' back
set label 101 'optimized rungs' at graph 0.99, graph 0.95 right tc rgb '#1f77b4'
plot 'speedup-fusion-softmax-cpu.dat' using 1:2:($1-0.35):($1+0.35):(0):2:3:xtic(5) with boxxyerror lc rgb variable, \
     '' using 1:2:4 with labels offset 0,0.8 font ',12'
set terminal pngcairo size 1280,800 noenhanced font 'Sans,11'
set output 'speedup-fusion-softmax-cpu.png'
replot
unset output
