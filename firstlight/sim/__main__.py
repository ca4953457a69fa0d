from firstlight.sim.server import main

main()
