/* plain FMA loop: 12 independent vectors of 16 floats, compiler-vectorised */
#include <stdio.h>
#include <omp.h>
#define ACC (12*16)
int main(int argc,char**argv){ long iters=200000000L/ (argc>1?1:1);
 double best=1e30; float sink=0;
 for(int r=0;r<5;r++){ double t=omp_get_wtime(); float tot=0;
#pragma omp parallel reduction(+:tot)
 { float acc[ACC]; float x=1.0000001f+omp_get_thread_num()*1e-9f, y=0.9999999f;
   for(int j=0;j<ACC;j++) acc[j]=j*1e-3f;
   for(long i=0;i<iters/16;i++){
#pragma omp simd
     for(int j=0;j<ACC;j++) acc[j]=acc[j]*x+y;
   }
   for(int j=0;j<ACC;j++) tot+=acc[j]; }
 t=omp_get_wtime()-t; if(t<best)best=t; sink+=tot;}
 double flops=2.0*ACC*(iters/16)*omp_get_max_threads();
 printf("threads=%d fp32 FMA best %.1f GFLOP/s (sink %g)\n",omp_get_max_threads(),flops/best/1e9,sink);}
