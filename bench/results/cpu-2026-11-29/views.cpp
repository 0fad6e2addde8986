#include <mpi.h>
#include <vector>
#include <cstdio>
#include <cstdlib>
#include "ddp/ddp.h"
int main(int argc,char**argv){ ddp_comm* w; if(ddp_init(nullptr,&w)){printf("%s\n",ddp_last_error_message());return 1;}
 int n=atoi(argv[1]), each=atoi(argv[2]), iters=atoi(argv[3]);
 std::vector<float> flat((size_t)n*each,1.0f); std::vector<ddp_tensor> v;
 for(int i=0;i<n;i++) v.push_back({flat.data()+(size_t)i*each,each,DDP_DTYPE_F32,DDP_DEVICE_CPU,0,0});
 for(int i=0;i<20;i++) ddp_allreduce_tensor_list(w,v.data(),n,DDP_OP_SUM,nullptr);
 double t=MPI_Wtime(); for(int i=0;i<iters;i++) ddp_allreduce_tensor_list(w,v.data(),n,DDP_OP_SUM,nullptr); double a=(MPI_Wtime()-t)/iters;
 t=MPI_Wtime(); for(int i=0;i<iters;i++) ddp_allreduce_tensor_list(w,v.data(),1,DDP_OP_SUM,nullptr); double b1=(MPI_Wtime()-t)/iters;
 ddp_tensor one={flat.data(),(int64_t)n*each,DDP_DTYPE_F32,DDP_DEVICE_CPU,0,0};
 t=MPI_Wtime(); for(int i=0;i<iters;i++) ddp_allreduce_tensor_list(w,&one,1,DDP_OP_SUM,nullptr); double b=(MPI_Wtime()-t)/iters;
 t=MPI_Wtime(); for(int i=0;i<iters;i++) MPI_Allreduce(MPI_IN_PLACE,flat.data(),n*each,MPI_FLOAT,MPI_SUM,MPI_COMM_WORLD); double c=(MPI_Wtime()-t)/iters;
 int r; MPI_Comm_rank(MPI_COMM_WORLD,&r); if(!r) printf("views %.1f us  one-tensor %.1f us  mpi %.1f us\n",a*1e6,b*1e6,c*1e6);
 ddp_finalize(w);}
