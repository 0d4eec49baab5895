torchrun --nnodes=1 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29500 --rdzv-id=llama2-7b-tp2-pp1-dp4 --max-restarts=0 train.py --deepspeed_config ds_config.json
