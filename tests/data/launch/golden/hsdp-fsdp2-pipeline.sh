torchrun --nnodes=4 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29500 --rdzv-id=llama3-8b-tp2-pp2-dp8 --max-restarts=0 -m torchtitan.train --job.config_file plan.toml
